package awstags

import (
	"maps"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestRoundTripSorted(t *testing.T) {
	m := map[string]string{"b": "2", "a": "1", "karpenter.sh/nodepool": "default"}
	ec2 := EC2(m)
	iam := IAM(m)
	for i, want := range []string{"a", "b", "karpenter.sh/nodepool"} {
		if aws.ToString(ec2[i].Key) != want || aws.ToString(iam[i].Key) != want {
			t.Fatalf("tag %d: EC2 %q, IAM %q; want %q (sorted by key)", i, aws.ToString(ec2[i].Key), aws.ToString(iam[i].Key), want)
		}
	}
	if got := FromEC2(ec2); !maps.Equal(got, m) {
		t.Errorf("FromEC2(EC2(m)) = %v, want %v", got, m)
	}
	if got := FromIAM(iam); !maps.Equal(got, m) {
		t.Errorf("FromIAM(IAM(m)) = %v, want %v", got, m)
	}
	if EC2(nil) != nil || IAM(map[string]string{}) != nil {
		t.Error("no tags should be no list, so requests leave Tags out")
	}
}
