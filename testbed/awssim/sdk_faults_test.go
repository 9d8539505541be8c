package awssim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/karpool/karpool/testbed/awssim"
)

// throttledRun makes n DescribeSubnets calls through a retryer and returns how many attempts
// the simulator throttled.
func throttledRun(t *testing.T, seed uint64, rate float64, retryer func() aws.Retryer, n int) (throttled int, failures int) {
	t.Helper()
	srv, cfg := newSim(t, awssim.Options{Seed: seed, Logf: func(string, ...any) {}})
	srv.SetFaults(awssim.Faults{ThrottleRate: rate})
	cfg.Retryer = retryer
	c := ec2.NewFromConfig(cfg)
	ctx := testCtx(t, 2*time.Minute)
	for i := 0; i < n; i++ {
		if _, err := c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{}); err != nil {
			failures++
			if errorCode(err) != "RequestLimitExceeded" {
				t.Fatalf("unexpected error %v", err)
			}
		}
	}
	for _, call := range srv.Calls() {
		if call.ErrorCode == "RequestLimitExceeded" {
			throttled++
		}
	}
	return throttled, failures
}

func fastBackoff(o *retry.StandardOptions) {
	o.MaxAttempts = 10
	o.MaxBackoff = 20 * time.Millisecond
	o.Backoff = retry.NewExponentialJitterBackoff(20 * time.Millisecond)
}

func TestThrottlingConvergesWithSDKRetryers(t *testing.T) {
	standard := func() aws.Retryer { return retry.NewStandard(fastBackoff) }
	start := time.Now()
	throttled, failures := throttledRun(t, 7, 0.3, standard, 60)
	t.Logf("standard: %v", time.Since(start))
	if failures != 0 || throttled < 5 {
		t.Errorf("standard retryer: %d failures, %d throttled attempts", failures, throttled)
	}
	// Same seed, same sequence: the same attempts are throttled.
	again, _ := throttledRun(t, 7, 0.3, standard, 60)
	if again != throttled {
		t.Errorf("seeded throttling not reproducible: %d then %d", throttled, again)
	}
	adaptive := func() aws.Retryer {
		return retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) { o.StandardOptions = append(o.StandardOptions, fastBackoff) })
	}
	// Adaptive mode slows the client down after each throttle (its token bucket refills at as
	// little as 0.5 requests per second), so it gets fewer calls.
	start = time.Now()
	th, f := throttledRun(t, 3, 0.3, adaptive, 10)
	t.Logf("adaptive: %v", time.Since(start))
	if f != 0 || th == 0 {
		t.Errorf("adaptive retryer: %d failures, %d throttled", f, th)
	}
	// Always throttled: the SDK gives up with the throttling error after its attempts.
	if _, f := throttledRun(t, 1, 1, func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) { fastBackoff(o); o.MaxAttempts = 3 })
	}, 2); f != 2 {
		t.Errorf("rate 1: %d failures, want 2", f)
	}
}

// TestThrottlingShapes checks every protocol's throttling error is one the SDK retries.
func TestThrottlingShapes(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{Logf: func(string, ...any) {}})
	srv.SetFaults(awssim.Faults{ThrottleRate: 1})
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	ctx := testCtx(t, time.Minute)
	checks := map[string]error{}
	_, checks["ec2"] = ec2.NewFromConfig(cfg).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	_, checks["iam"] = iam.NewFromConfig(cfg).ListRoles(ctx, &iam.ListRolesInput{})
	_, checks["sts"] = sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	_, checks["sqs"] = sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{})
	_, checks["events"] = eventbridge.NewFromConfig(cfg).ListRules(ctx, &eventbridge.ListRulesInput{})
	_, checks["ssm"] = ssm.NewFromConfig(cfg).GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String("/x")})
	_, checks["pricing"] = pricing.NewFromConfig(cfg).GetProducts(ctx, &pricing.GetProductsInput{ServiceCode: aws.String("AmazonEC2")})
	_, checks["eks"] = eks.NewFromConfig(cfg).DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("karpool")})
	want := map[string]string{"ec2": "RequestLimitExceeded", "iam": "Throttling", "sts": "Throttling", "sqs": "ThrottlingException",
		"events": "ThrottlingException", "ssm": "ThrottlingException", "pricing": "ThrottlingException", "eks": "ThrottlingException"}
	throttle := retry.IsErrorThrottles(retry.DefaultThrottles)
	for svc, err := range checks {
		if errorCode(err) != want[svc] {
			t.Errorf("%s: error %v, want %s", svc, err, want[svc])
		}
		if throttle.IsErrorThrottle(err) != aws.TrueTernary {
			t.Errorf("%s: the SDK does not treat %v as throttling", svc, err)
		}
	}
}

func TestErrorAndLatencyFaults(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	ctx := testCtx(t, time.Minute)
	// No retries, so no simulator error can hide behind one. This relies on the simulator's
	// config buffering request bodies (internal/awstransport): without it, the SDK's body race
	// breaks about one call in a thousand against a local endpoint (TestSDKRequestBodyCloseRace).
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	c := ec2.NewFromConfig(cfg)
	srv.SetFaults(awssim.Faults{
		Errors:     []awssim.ErrorFault{{Operation: "ec2:DescribeInstances", Rate: 1, Code: "Unavailable", Status: 503}, {Operation: "ec2:DescribeVpcs", Rate: 1}},
		APILatency: map[string]awssim.Duration{"ec2:DescribeSubnets": {Duration: 300 * time.Millisecond}},
	})
	_, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{})
	wantCode(t, err, "Unavailable")
	_, err = c.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	wantCode(t, err, "InternalError")
	start := time.Now()
	try(c.DescribeSubnets(ctx, &ec2.DescribeSubnetsInput{})).OK(t)
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("latency fault: call took %v", d)
	}

	// Launch and termination latencies hold instances in pending and shutting-down.
	srv.SetFaults(awssim.Faults{LaunchLatency: awssim.Duration{Duration: 700 * time.Millisecond}, TerminationLatency: awssim.Duration{Duration: 700 * time.Millisecond}})
	profile := nodeRole(t, cfg)
	subnets, sg := discovered(t, c)
	lt := createLT(t, c, "latency", al2023AMI(t, cfg, "x86_64"), sg, profile)
	out := try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets, "m5.large")))).OK(t)
	id := out.Instances[0].InstanceIds[0]
	state := func() string {
		d := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).OK(t)
		return string(d.Reservations[0].Instances[0].State.Name)
	}
	if s := state(); s != "pending" {
		t.Errorf("right after launch: %s", s)
	}
	eventually(t, 10*time.Second, "running after the launch latency", func() bool { return state() == "running" })
	try(c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}})).OK(t)
	if s := state(); s != "shutting-down" {
		t.Errorf("right after terminate: %s", s)
	}
	eventually(t, 10*time.Second, "terminated after the termination latency", func() bool { return state() == "terminated" })
	// AWS terminates an instance on its own.
	out = try(c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 1, fleetOverrides(subnets, "m5.large")))).OK(t)
	id = out.Instances[0].InstanceIds[0]
	srv.SetFaults(awssim.Faults{})
	if err := srv.TerminateByAWS(id); err != nil {
		t.Fatal(err)
	}
	d := try(c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})).OK(t)
	if i := d.Reservations[0].Instances[0]; aws.ToString(i.StateReason.Code) != "Server.InternalError" {
		t.Errorf("AWS termination: %+v", i.StateReason)
	}
}

func TestAuthentication(t *testing.T) {
	good := awssim.Credential{AccessKeyID: "AKIDGOOD", SecretAccessKey: "good-secret"}
	srv, cfg := newSim(t, awssim.Options{Credentials: []awssim.Credential{good}})
	ctx := testCtx(t, time.Minute)
	cfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }

	// Unsigned requests are rejected in each protocol's shape.
	for _, tc := range []struct {
		name, method, path, ctype, target, body string
		status                                  int
		contains                                string
	}{
		{"ec2", "POST", "/", "application/x-www-form-urlencoded", "", "Action=DescribeInstances&Version=2016-11-15", 401, "<Code>AuthFailure</Code>"},
		{"iam", "POST", "/", "application/x-www-form-urlencoded", "", "Action=ListRoles&Version=2010-05-08", 403, "<Code>MissingAuthenticationToken</Code>"},
		{"sqs", "POST", "/", "application/x-amz-json-1.0", "AmazonSQS.ListQueues", "{}", 403, `"__type":"com.amazonaws.sqs#MissingAuthenticationTokenException"`},
		{"ssm", "POST", "/", "application/x-amz-json-1.1", "AmazonSSM.GetParameter", "{}", 403, `"__type":"MissingAuthenticationTokenException"`},
		{"eks", "GET", "/clusters/karpool", "", "", "", 403, `"message":"Missing Authentication Token"`},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL()+tc.path, strings.NewReader(tc.body))
		if tc.ctype != "" {
			req.Header.Set("Content-Type", tc.ctype)
		}
		if tc.target != "" {
			req.Header.Set("X-Amz-Target", tc.target)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.contains) {
			t.Errorf("%s unsigned: %d %s", tc.name, resp.StatusCode, body)
		}
	}

	// Signed with the right key: every protocol verifies, including escaped REST paths.
	try(ec2.NewFromConfig(cfg).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})).OK(t)
	role := try(iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("r"), AssumeRolePolicyDocument: aws.String(ec2Trust)})).OK(t).Role
	try(sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{})).OK(t)
	try(sts.NewFromConfig(cfg).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})).OK(t)
	ek := eks.NewFromConfig(cfg)
	try(ek.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("karpool"), PrincipalArn: role.Arn})).OK(t)
	try(ek.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String("karpool"), PrincipalArn: role.Arn})).OK(t)

	bad := cfg.Copy()
	bad.Credentials = credentials.NewStaticCredentialsProvider("AKIDGOOD", "wrong", "")
	_, err := iam.NewFromConfig(bad).ListRoles(ctx, &iam.ListRolesInput{})
	wantCode(t, err, "SignatureDoesNotMatch")
	_, err = ec2.NewFromConfig(bad).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	wantCode(t, err, "AuthFailure")
	_, err = sqs.NewFromConfig(bad).ListQueues(ctx, &sqs.ListQueuesInput{})
	wantCode(t, err, "InvalidSignatureException")
	unknown := cfg.Copy()
	unknown.Credentials = credentials.NewStaticCredentialsProvider("AKIDOTHER", "x", "")
	_, err = sts.NewFromConfig(unknown).GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	wantCode(t, err, "InvalidClientTokenId")
	elsewhere := cfg.Copy()
	elsewhere.Region = "eu-west-1"
	_, err = ec2.NewFromConfig(elsewhere).DescribeVpcs(ctx, &ec2.DescribeVpcsInput{})
	wantCode(t, err, "AuthFailure")
}

func TestAdminAPI(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{})
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.AdminURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	put := func(path, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPut, srv.AdminURL()+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := put("faults", `{"throttleRate":0.25,"insufficientCapacity":[{"instanceType":"m5.large","zone":"us-east-1a"}],"launchLatency":"2s","apiLatency":{"ec2:*":0.01}}`); code != 200 {
		t.Fatalf("PUT faults: %d %s", code, body)
	}
	f := srv.Faults()
	if f.ThrottleRate != 0.25 || f.LaunchLatency.Duration != 2*time.Second || len(f.InsufficientCapacity) != 1 || f.APILatency["ec2:*"].Duration != 10*time.Millisecond {
		t.Errorf("faults %+v", f)
	}
	if code, _ := put("faults", `{"throttleRat":1}`); code != 400 {
		t.Errorf("unknown fault field accepted: %d", code)
	}
	srv.SetFaults(awssim.Faults{})
	try(ec2.NewFromConfig(cfg).DescribeVpcs(testCtx(t, time.Minute), &ec2.DescribeVpcsInput{})).OK(t)
	code, body := get("state")
	var st awssim.StateInfo
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.AccountID != "111122223333" || st.ClusterName != "karpool" {
		t.Errorf("state: %d %s", code, body)
	}
	if code, body := get("calls"); code != 200 || !strings.Contains(body, `"action": "DescribeVpcs"`) {
		t.Errorf("calls: %d %s", code, body)
	}
	if code, _ := get("nope"); code != 404 {
		t.Errorf("unknown endpoint: %d", code)
	}
	resp, err := http.Post(srv.AdminURL()+"terminate", "application/json", strings.NewReader(`{"instanceId":"i-0000000000000ffff"}`))
	if err != nil || resp.StatusCode != 404 {
		t.Errorf("terminate unknown: %v %v", err, resp.StatusCode)
	}
	resp.Body.Close()
}
