package interruption

import (
	"slices"
	"strings"
	"testing"
)

// Each event Karpenter's four rules deliver, as EventBridge wraps it.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		kind       Kind
		ids        []string
		disrupts   bool
	}{
		{"spot", `{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}`,
			SpotInterruption, []string{"i-0abc"}, true},
		{"rebalance", `{"source":"aws.ec2","detail-type":"EC2 Instance Rebalance Recommendation","detail":{"instance-id":"i-0abc"}}`,
			RebalanceRecommendation, []string{"i-0abc"}, false},
		{"stopping", `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-1","state":"stopping"}}`,
			StateChange, []string{"i-1"}, true},
		{"running", `{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-1","state":"running"}}`,
			Noop, []string{"i-1"}, false},
		{"health", `{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED","affectedEntities":[{"entityValue":"i-2"},{"entityValue":"vol-1"},{"entityValue":"i-3"}]}}`,
			ScheduledChange, []string{"i-2", "i-3"}, true},
		{"health other", `{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"RDS","eventTypeCategory":"scheduledChange"}}`,
			Noop, nil, false},
		{"other source", `{"source":"aws.s3","detail-type":"Object Created","detail":{}}`, Noop, nil, false},
	} {
		m, err := Parse(tc.body)
		if err != nil || m.Kind != tc.kind || !slices.Equal(m.InstanceIDs, tc.ids) || m.Disrupts() != tc.disrupts {
			t.Errorf("%s: %+v, %v; want %s %v (disrupts %v)", tc.name, m, err, tc.kind, tc.ids, tc.disrupts)
		}
	}
}

// Bodies that are not the events the rules deliver are errors that say what is wrong.
func TestParseRejects(t *testing.T) {
	for body, want := range map[string]string{
		`not json`: "not an EventBridge event",
		`{}`:       "no source or detail-type",
		`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"vol-1"}}`:                                  `detail.instance-id "vol-1"`,
		`{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","eventTypeCode":"X"}}`: "names no instance",
		`{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":[1]}`:                                                      "detail",
	} {
		if _, err := Parse(body); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s): %v, want an error saying %q", body, err, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add(`{"source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","detail":{"instance-id":"i-0abc"}}`)
	f.Add(`{"source":"aws.health","detail-type":"AWS Health Event","detail":{"service":"EC2","eventTypeCategory":"scheduledChange","affectedEntities":[{"entityValue":"i-1"}]}}`)
	f.Add(`{"source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","detail":{"instance-id":"i-1","state":"terminated"}}`)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := Parse(body)
		if err != nil {
			return
		}
		if m.Disrupts() && len(m.InstanceIDs) == 0 {
			t.Errorf("Parse(%q) = %+v: disrupts no instance", body, m)
		}
		for _, id := range m.InstanceIDs {
			if !strings.HasPrefix(id, "i-") {
				t.Errorf("Parse(%q): instance ID %q", body, id)
			}
		}
	})
}
