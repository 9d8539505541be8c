package awssim

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

var fuzzServer *Server

func fuzzSim(tb testing.TB) *Server {
	if fuzzServer == nil {
		s, err := New(Options{})
		if err != nil {
			tb.Fatal(err)
		}
		fuzzServer = s
	}
	return fuzzServer
}

// decodeOnly runs the request parsers (not the operations) on a raw request.
func decodeOnly(s *Server, svc string, r *http.Request, body []byte) {
	rc := &reqCtx{ctx: context.Background(), s: s, r: r, svc: s.services[svc], body: body}
	_, _, _ = s.decodeRequest(rc)
}

// FuzzEC2Query feeds arbitrary form bodies to the ec2query and awsquery decoders.
func FuzzEC2Query(f *testing.F) {
	f.Add("Action=CreateFleet&Version=2016-11-15&LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateId=lt-1&LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large&TargetCapacitySpecification.TotalTargetCapacity=1&Type=instant")
	f.Add("Action=DescribeInstances&Filter.1.Name=tag%3Aa&Filter.1.Value.1=b&MaxResults=5")
	f.Add("Action=RunInstances&MinCount=x&MaxCount=1")
	f.Add("Action=CreateLaunchTemplate&LaunchTemplateData.BlockDeviceMapping.1.Ebs.VolumeSize=20&LaunchTemplateData.TagSpecification.999999.Tag.1.Key=k")
	f.Add("Action=CreateRole&Version=2010-05-08&Tags.member.1.Key=a&Tags.member.1.Value=b")
	f.Add("%zz&Action")
	f.Fuzz(func(t *testing.T, body string) {
		s := fuzzSim(t)
		for _, svc := range []string{"ec2", "iam", "sts"} {
			r := httptest.NewRequest("POST", "/", strings.NewReader(body))
			decodeOnly(s, svc, r, []byte(body))
		}
	})
}

// FuzzJSONRequest feeds arbitrary JSON bodies to every JSON operation's decoder.
func FuzzJSONRequest(f *testing.F) {
	f.Add("AmazonSQS.ReceiveMessage", `{"QueueUrl":"q","WaitTimeSeconds":20,"MaxNumberOfMessages":10}`)
	f.Add("AWSEvents.PutEvents", `{"Entries":[{"Source":"a","Time":1.5e9}]}`)
	f.Add("AmazonSSM.GetParameter", `{"Name":null}`)
	f.Add("AWSPriceListService.GetProducts", `{"Filters":[{"Type":"TERM_MATCH"}]}`)
	f.Fuzz(func(t *testing.T, target, body string) {
		s := fuzzSim(t)
		for _, svc := range []string{"sqs", "events", "ssm", "pricing"} {
			r := httptest.NewRequest("POST", "/", strings.NewReader(body))
			r.Header.Set("X-Amz-Target", target)
			decodeOnly(s, svc, r, []byte(body))
		}
	})
}

// FuzzUserData feeds arbitrary user data to the bootstrap parsers.
func FuzzUserData(f *testing.F) {
	f.Add(testAL2023)
	f.Add(testAL2)
	f.Add(testBottlerocket)
	f.Add("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=x\n\n--x\n")
	f.Fuzz(func(t *testing.T, data string) {
		var b bootstrap
		b.labels = map[string]string{}
		_ = b.parse([]byte(data))
	})
}

// FuzzEventPattern checks pattern parsing and matching never panic.
func FuzzEventPattern(f *testing.F) {
	f.Add(`{"source":["aws.ec2"],"detail":{"state":[{"anything-but":{"prefix":"x"}}]}}`, `{"source":"aws.ec2","detail":{"state":"x"}}`)
	f.Add(`{"a":[{"numeric":["<",1,">"]}]}`, `{"a":[1,2]}`)
	f.Fuzz(func(t *testing.T, pattern, event string) {
		p, err := parsePattern(pattern)
		if err != nil {
			return
		}
		var doc map[string]any
		if jsonUnmarshal([]byte(event), &doc) != nil {
			return
		}
		matchPattern(p, doc)
	})
}
