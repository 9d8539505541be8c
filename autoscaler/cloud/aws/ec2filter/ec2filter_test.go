package ec2filter

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

func TestTags(t *testing.T) {
	got := ""
	for _, f := range Tags(map[string]string{"team": "web", "karpenter.sh/discovery": "*"}) {
		got += fmt.Sprintf("%s=%v ", aws.ToString(f.Name), f.Values)
	}
	// Key order; "*" is any value of the key.
	if want := "tag-key=[karpenter.sh/discovery] tag:team=[web] "; got != want {
		t.Errorf("Tags = %q, want %q", got, want)
	}
	if len(Tags(nil)) != 0 {
		t.Error("no tags, no filters")
	}
}
