package operator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

// TestSpotInterruptionReplacesNode: EventBridge (in the simulator) delivers a spot interruption
// warning to the queue given with --interruption-queue; karpool deletes the instance's NodeClaim
// at once, its pods move to a new node of another offering (the interrupted one is avoided for
// a while), and the message leaves the queue, as does a malformed one.
func TestSpotInterruptionReplacesNode(t *testing.T) {
	h := newHarness(t)
	url := h.interruptionQueue("karpool-interruption")
	h.cfg.InterruptionQueue = "karpool-interruption"
	h.startController()
	ns := h.namespace("interruption")
	h.workshopPools()
	h.updatePool(func(np *karpv1.NodePool) { setValues(np, karpv1.LabelCapacityType, karpv1.CapacityTypeSpot) })
	h.inflate(ns, 2)
	h.runningPods(ns, "inflate", 2, 3*time.Minute)
	claims := h.nodeClaims()
	if len(claims) != 1 || claims[0].Labels[karpv1.LabelCapacityType] != karpv1.CapacityTypeSpot {
		t.Fatalf("want one spot NodeClaim, got %d", len(claims))
	}
	old := claims[0]
	offering := old.Labels[corev1.LabelInstanceTypeStable] + " in " + old.Labels[corev1.LabelTopologyZone]
	instance := old.Status.ProviderID[strings.LastIndex(old.Status.ProviderID, "/")+1:]
	// A message no rule would send is logged and deleted, not retried forever.
	if _, err := sqs.NewFromConfig(h.sim.AWSConfig()).SendMessage(h.ctx, &sqs.SendMessageInput{QueueUrl: &url, MessageBody: aws.String("not an event")}); err != nil {
		t.Fatal(err)
	}
	if err := h.sim.InterruptSpot(instance, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	h.eventually("the interrupted NodeClaim replaced and the pods moved", 3*time.Minute, func() error {
		var nc karpv1.NodeClaim
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(&old), &nc); !apierrors.IsNotFound(err) {
			return fmt.Errorf("NodeClaim %s still there (%v)", old.Name, err)
		}
		var pods corev1.PodList
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "inflate"}); err != nil {
			return err
		}
		moved := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning && p.Spec.NodeName != "" && p.Spec.NodeName != old.Status.NodeName {
				moved++
			}
		}
		if moved != 2 || len(pods.Items) != 2 {
			return fmt.Errorf("%d of %d pods Running on another node", moved, len(pods.Items))
		}
		return nil
	})
	for _, nc := range h.nodeClaims() {
		if got := nc.Labels[corev1.LabelInstanceTypeStable] + " in " + nc.Labels[corev1.LabelTopologyZone]; got == offering {
			t.Errorf("replacement %s launched as the interrupted offering %s", nc.Name, got)
		}
	}
	var events corev1.EventList
	if err := h.c.List(h.ctx, &events, client.MatchingFields{"involvedObject.name": old.Name}); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, e := range events.Items {
		found = found || e.Reason == "SpotInterrupted"
	}
	if !found {
		t.Errorf("no SpotInterrupted event on NodeClaim %s", old.Name)
	}
	h.eventually("the message deleted from the queue", time.Minute, func() error {
		out, err := sqs.NewFromConfig(h.sim.AWSConfig()).GetQueueAttributes(h.ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: &url, AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"}})
		if err != nil {
			return err
		}
		if v, nv := out.Attributes["ApproximateNumberOfMessages"], out.Attributes["ApproximateNumberOfMessagesNotVisible"]; v != "0" || nv != "0" {
			return fmt.Errorf("%s visible and %s in-flight messages", v, nv)
		}
		return nil
	})
}

// interruptionQueue creates an SQS queue that EventBridge may send to, and Karpenter's four
// interruption rules targeting it, in the simulator; it returns the queue's URL.
func (h *harness) interruptionQueue(name string) string {
	h.t.Helper()
	q, eb := sqs.NewFromConfig(h.sim.AWSConfig()), eventbridge.NewFromConfig(h.sim.AWSConfig())
	out, err := q.CreateQueue(h.ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	if err != nil {
		h.t.Fatal(err)
	}
	arn := "arn:aws:sqs:" + h.sim.AWSConfig().Region + ":" + accountOf(aws.ToString(out.QueueUrl)) + ":" + name
	policy := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":["events.amazonaws.com","sqs.amazonaws.com"]},"Action":"sqs:SendMessage","Resource":%q}]}`, arn)
	if _, err := q.SetQueueAttributes(h.ctx, &sqs.SetQueueAttributesInput{QueueUrl: out.QueueUrl, Attributes: map[string]string{"Policy": policy}}); err != nil {
		h.t.Fatal(err)
	}
	for rule, pattern := range map[string]string{
		"ScheduledChange":     `{"source":["aws.health"],"detail-type":["AWS Health Event"]}`,
		"SpotInterruption":    `{"source":["aws.ec2"],"detail-type":["EC2 Spot Instance Interruption Warning"]}`,
		"Rebalance":           `{"source":["aws.ec2"],"detail-type":["EC2 Instance Rebalance Recommendation"]}`,
		"InstanceStateChange": `{"source":["aws.ec2"],"detail-type":["EC2 Instance State-change Notification"]}`,
	} {
		if _, err := eb.PutRule(h.ctx, &eventbridge.PutRuleInput{Name: aws.String(name + "-" + rule), EventPattern: aws.String(pattern)}); err != nil {
			h.t.Fatal(err)
		}
		if _, err := eb.PutTargets(h.ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name + "-" + rule),
			Targets: []ebtypes.Target{{Id: aws.String("queue"), Arn: aws.String(arn)}}}); err != nil {
			h.t.Fatal(err)
		}
	}
	return aws.ToString(out.QueueUrl)
}

// accountOf reads the account from a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>).
func accountOf(url string) string {
	parts := strings.Split(url, "/")
	return parts[len(parts)-2]
}
