package disruption

import (
	"context"
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/state"
)

// Drifter checks an instance against what its node class resolves to now (AMI, subnet,
// security groups): the cloud provider.
type Drifter interface {
	IsDrifted(ctx context.Context, nc *karpv1.NodeClaim, class *awsv1.EC2NodeClass) (cloud.DriftReason, error)
}

// cloudCheck is the last cloud drift answer for a NodeClaim and the class resolution it was
// given against: an instance's AMI, subnet and security groups do not change, so the answer
// holds until the class resolves to something else.
type cloudCheck struct {
	resolved string
	reason   cloud.DriftReason
}

// maxCloudChecks caps the questions to the cloud per pass (one DescribeInstances each), so
// that a controller starting on a large cluster, or a class change, spreads its checks over
// passes instead of bursting into the API's throttling.
const maxCloudChecks = 50

// addCloudDrift adds to drift the NodeClaims whose instances no longer match their class's
// resolution, asking the cloud only when a class resolves differently from the last answer,
// at most maxCloudChecks times per pass. A failed check is logged and judged again later.
func (c *Controller) addCloudDrift(ctx context.Context, snap *state.Cluster, drift map[string]Verdict) {
	if c.opts.Drift == nil {
		return
	}
	resolved := map[string]string{}
	live := map[string]bool{}
	asked := 0
	for _, nc := range snap.NodeClaims {
		class := classOf(snap, nc)
		if _, done := drift[nc.Name]; done || class == nil || nc.DeletionTimestamp != nil || !state.Launched(nc) {
			continue
		}
		live[nc.Name] = true
		key, ok := resolved[class.Name]
		if !ok {
			key = resolutionKey(class)
			resolved[class.Name] = key
		}
		last, ok := c.clouds[nc.Name]
		if !ok || last.resolved != key {
			if asked == maxCloudChecks {
				continue // an earlier answer, for another resolution, no longer counts
			}
			asked++
			reason, err := c.opts.Drift.IsDrifted(ctx, nc, class)
			if err != nil {
				log.FromContext(ctx).Error(err, "checking drift failed; will retry", "NodeClaim", nc.Name)
				continue
			}
			last = cloudCheck{key, reason}
			c.clouds[nc.Name] = last
		}
		if last.reason != "" {
			drift[nc.Name] = Verdict{string(last.reason), cloudDriftMessage(last.reason, class.Name)}
		}
	}
	for name := range c.clouds {
		if !live[name] {
			delete(c.clouds, name)
		}
	}
}

// resolutionKey identifies what a class resolves to: its status's AMIs, subnets and security
// groups.
func resolutionKey(class *awsv1.EC2NodeClass) string {
	b, _ := json.Marshal([]any{class.Status.AMIs, class.Status.Subnets, class.Status.SecurityGroups})
	return string(b)
}

func cloudDriftMessage(reason cloud.DriftReason, class string) string {
	what := map[cloud.DriftReason]string{
		cloud.DriftAMI:           "its AMI is not one EC2NodeClass %s selects any more",
		cloud.DriftSubnet:        "its subnet is not one EC2NodeClass %s selects any more",
		cloud.DriftSecurityGroup: "its security groups are not the ones EC2NodeClass %s selects now",
	}[reason]
	if what == "" {
		what = "it no longer matches EC2NodeClass %s"
	}
	return fmt.Sprintf("the instance drifted: "+what, class)
}
