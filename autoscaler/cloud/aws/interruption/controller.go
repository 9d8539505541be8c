package interruption

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/metrics"
)

// SQS is the part of the SQS API the controller calls (the policy grants exactly these).
type SQS interface {
	GetQueueUrl(context.Context, *sqs.GetQueueUrlInput, ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(context.Context, *sqs.ReceiveMessageInput, ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(context.Context, *sqs.DeleteMessageInput, ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Options configure the controller.
type Options struct {
	Queue    string // the queue's name
	Recorder record.EventRecorder
	Metrics  *metrics.Metrics
	// MarkUnavailable avoids a spot offering that was just interrupted, for a while (as after
	// insufficient capacity), so its replacement goes elsewhere.
	MarkUnavailable func(instanceType, zone, capacityType string)
	// RetryAfter is the pause after a failed receive (default 10 s).
	RetryAfter time.Duration
}

// Controller long-polls the queue; it is a manager Runnable (leader only).
type Controller struct {
	sqs    SQS
	client client.Client
	opts   Options
}

// New returns the controller.
func New(q SQS, c client.Client, opts Options) *Controller {
	if opts.Recorder == nil {
		opts.Recorder = &record.FakeRecorder{}
	}
	if opts.RetryAfter <= 0 {
		opts.RetryAfter = 10 * time.Second
	}
	return &Controller{sqs: q, client: c, opts: opts}
}

// Start resolves the queue and handles its messages until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("interruption")
	var url string
	for url == "" {
		out, err := c.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(c.opts.Queue)})
		if err == nil {
			url = aws.ToString(out.QueueUrl)
			break
		}
		logger.Error(err, "cannot find the interruption queue; retrying", "queue", c.opts.Queue)
		if !sleep(ctx, c.opts.RetryAfter) {
			return nil
		}
	}
	logger.Info("watching the interruption queue", "queue", c.opts.Queue)
	for ctx.Err() == nil {
		if err := c.poll(log.IntoContext(ctx, logger), url); err != nil && ctx.Err() == nil {
			logger.Error(err, "receiving from the interruption queue", "queue", c.opts.Queue)
			sleep(ctx, c.opts.RetryAfter)
		}
	}
	return nil
}

// poll receives up to 10 messages (waiting up to 20 s for one) and handles each.
func (c *Controller) poll(ctx context.Context, url string) error {
	out, err := c.sqs.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 20, VisibilityTimeout: 20,
		MessageSystemAttributeNames: []sqstypes.MessageSystemAttributeName{sqstypes.MessageSystemAttributeNameSentTimestamp},
	})
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range out.Messages {
		if err := c.handle(ctx, m); err != nil {
			errs = append(errs, err) // kept: the message comes back after its visibility timeout
			continue
		}
		if _, err := c.sqs.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: m.ReceiptHandle}); err != nil {
			errs = append(errs, err)
			continue
		}
		if c.opts.Metrics != nil {
			c.opts.Metrics.InterruptionDeleted.Inc()
		}
	}
	return errors.Join(errs...)
}

// handle acts on one message. An unreadable message is reported and handled (deleted): it
// would never become readable.
func (c *Controller) handle(ctx context.Context, raw sqstypes.Message) error {
	logger := log.FromContext(ctx)
	msg, err := Parse(aws.ToString(raw.Body))
	if c.opts.Metrics != nil {
		c.opts.Metrics.InterruptionReceived.WithLabelValues(string(cmpKind(msg.Kind, err))).Inc()
		if ms, perr := strconv.ParseInt(raw.Attributes[string(sqstypes.MessageSystemAttributeNameSentTimestamp)], 10, 64); perr == nil {
			c.opts.Metrics.InterruptionQueueDuration.Observe(time.Since(time.UnixMilli(ms)).Seconds())
		}
	}
	if err != nil {
		logger.Error(err, "dropping an unreadable interruption message", "message-id", aws.ToString(raw.MessageId))
		return nil
	}
	if msg.Kind == Noop {
		return nil
	}
	claims, err := c.claimsOf(ctx, msg.InstanceIDs)
	if err != nil {
		return err
	}
	var errs []error
	for _, nc := range claims {
		errs = append(errs, c.act(ctx, msg, nc))
	}
	return errors.Join(errs...)
}

// act reports the message on the NodeClaim and its node and, if the instance is going away,
// deletes the NodeClaim (its finalizer drains the node and terminates the instance).
func (c *Controller) act(ctx context.Context, msg Message, nc *karpv1.NodeClaim) error {
	reason, text := eventFor(msg)
	c.opts.Recorder.Event(nc, corev1.EventTypeWarning, reason, text)
	if node := nc.Status.NodeName; node != "" {
		c.opts.Recorder.Event(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}, corev1.EventTypeWarning, reason, text)
	}
	if !msg.Disrupts() || nc.DeletionTimestamp != nil {
		return nil
	}
	if msg.Kind == SpotInterruption && c.opts.MarkUnavailable != nil {
		c.opts.MarkUnavailable(nc.Labels[corev1.LabelInstanceTypeStable], nc.Labels[corev1.LabelTopologyZone], karpv1.CapacityTypeSpot)
	}
	log.FromContext(ctx).Info("initiating delete from interruption message", "messageKind", string(msg.Kind), "detail", msg.Detail,
		"NodeClaim", klog.KObj(nc), "Node", klog.KRef("", nc.Status.NodeName))
	if err := c.client.Delete(ctx, nc); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting NodeClaim %s: %w", nc.Name, err)
	}
	if c.opts.Metrics != nil {
		c.opts.Metrics.NodeClaimsDisrupted.WithLabelValues("interruption", nc.Labels[karpv1.LabelNodePool], nc.Labels[karpv1.LabelCapacityType]).Inc()
	}
	return nil
}

// claimsOf finds the NodeClaims of the instances (status.providerID aws:///<zone>/<id>).
func (c *Controller) claimsOf(ctx context.Context, ids []string) ([]*karpv1.NodeClaim, error) {
	var list karpv1.NodeClaimList
	if err := c.client.List(ctx, &list); err != nil {
		return nil, err
	}
	var out []*karpv1.NodeClaim
	for i := range list.Items {
		pid := list.Items[i].Status.ProviderID
		for _, id := range ids {
			if strings.HasSuffix(pid, "/"+id) {
				out = append(out, &list.Items[i])
			}
		}
	}
	return out, nil
}

// eventFor names the Kubernetes event of a message (Karpenter's reasons).
func eventFor(m Message) (reason, text string) {
	switch m.Kind {
	case SpotInterruption:
		return "SpotInterrupted", "Spot interruption warning was triggered"
	case RebalanceRecommendation:
		return "SpotRebalanceRecommendation", "Spot rebalance recommendation was triggered"
	case ScheduledChange:
		return "InstanceUnhealthy", "An unhealthy warning was triggered: " + m.Detail
	case StateChange:
		if m.State == "stopping" || m.State == "stopped" {
			return "InstanceStopping", "Instance is stopping"
		}
		return "InstanceTerminating", "Instance is terminating"
	}
	return "Interruption", m.Detail
}

func cmpKind(k Kind, err error) Kind {
	if err != nil {
		return "unknown"
	}
	return k
}

// sleep waits d or until ctx ends; false if ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
