// Package ensure makes an AWS account hold the prerequisites prereq.Render describes, through
// the AWS API: it reads each resource, says what differs (a plan), and, unless asked only to
// plan, creates or corrects it, in dependency order (roles before profiles, the queue before
// its rules). It changes only what karpool owns — tagged karpool.dev/cluster=<cluster>, or an
// instance profile the controller tagged for the cluster — except for adding the discovery tag;
// it prunes owned instance profiles and rules that left the desired state. A run that fails half
// way leaves what it did, and the next run continues from there.
package ensure

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
)

// Clients are the APIs the prerequisites live in.
type Clients struct {
	IAM    *iam.Client
	SQS    *sqs.Client
	Events *eventbridge.Client
	EKS    *eks.Client
	EC2    *ec2.Client
	STS    *sts.Client
}

// NewClients makes the clients of one configuration (the SDK's standard retryer backs off on
// throttling).
func NewClients(cfg aws.Config) Clients {
	return Clients{IAM: iam.NewFromConfig(cfg), SQS: sqs.NewFromConfig(cfg), Events: eventbridge.NewFromConfig(cfg),
		EKS: eks.NewFromConfig(cfg), EC2: ec2.NewFromConfig(cfg), STS: sts.NewFromConfig(cfg)}
}

// Op is what a Change does.
type Op string

// The operations of a plan, with the sign the plan shows.
const (
	Create Op = "+"
	Update Op = "~"
	Delete Op = "-"
	// Keep is a resource that differs but is not karpool's: it is reported and left alone.
	Keep Op = "!"
	// Manual is a step apply does not take (aws-auth entries).
	Manual Op = "?"
)

// Change is one difference between the account and the desired resources.
type Change struct {
	Op     Op
	Kind   string // "IAM role", "SQS queue", ...
	Name   string
	Fields []string // what differs, for updates
}

// Options say how Run works.
type Options struct {
	// PlanOnly reads and reports the changes without making any.
	PlanOnly bool
	// KeepInstanceProfiles leaves the cluster's instance profiles of classes missing from the
	// resources alone. PoolSync sets it: in a cluster, the EC2NodeClass controller deletes a
	// class's profile with the class, and a class applied from elsewhere is not in the revision.
	KeepInstanceProfiles bool
}

// Run compares the account with r and, unless opts.PlanOnly, makes the changes. It returns the
// changes (made, or to make) up to the first error.
func Run(ctx context.Context, c Clients, r *prereq.Resources, opts Options) ([]Change, error) {
	e := &ensurer{c: c, r: r, s: r.Settings, dry: opts.PlanOnly}
	steps := []func(context.Context) error{
		e.nodeRoles, e.instanceProfiles, e.controllerPolicies, e.controllerRole, e.queue, e.rules,
		e.discoveryTags, e.nodeAccess, e.serviceLinkedRoles, e.podIdentity, e.pruneRules,
	}
	if !opts.KeepInstanceProfiles {
		steps = append(steps, e.pruneInstanceProfiles)
	}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return e.changes, err
		}
	}
	return e.changes, nil
}

// Text is the plan as people read it: one line per change, its fields below, and a count.
func Text(changes []Change) string {
	var b strings.Builder
	for _, ch := range changes {
		fmt.Fprintf(&b, "%s %s %s\n", ch.Op, ch.Kind, ch.Name)
		for _, f := range ch.Fields {
			fmt.Fprintf(&b, "    %s\n", f)
		}
	}
	if len(changes) == 0 {
		b.WriteString("The account holds every prerequisite: nothing to change.\n")
		return b.String()
	}
	fmt.Fprintf(&b, "\n%s.\n", Summary(changes))
	return b.String()
}

// Summary counts the changes by operation: "2 to create, 1 to update, 0 to delete", and the
// resources left alone or to handle by hand when there are any.
func Summary(changes []Change) string {
	if len(changes) == 0 {
		return "nothing to change"
	}
	n := map[Op]int{}
	for _, ch := range changes {
		n[ch.Op]++
	}
	s := fmt.Sprintf("%d to create, %d to update, %d to delete", n[Create], n[Update], n[Delete])
	if n[Keep] > 0 {
		s += fmt.Sprintf(", %d not karpool's (left as they are)", n[Keep])
	}
	if n[Manual] > 0 {
		s += fmt.Sprintf(", %d to do by hand", n[Manual])
	}
	return s
}

type ensurer struct {
	c       Clients
	r       *prereq.Resources
	s       prereq.Settings
	dry     bool
	changes []Change
}

// change records a change and tells whether to make it.
func (e *ensurer) change(op Op, kind, name string, fields ...string) bool {
	e.changes = append(e.changes, Change{Op: op, Kind: kind, Name: name, Fields: fields})
	return !e.dry && op != Keep && op != Manual
}

// owned says whether tags mark a resource as karpool's for this cluster.
func (e *ensurer) owned(tags map[string]string) bool {
	return tags[prereq.OwnerTag] == e.s.ClusterName
}

func (e *ensurer) notOwned(kind, name string, diffs []string) {
	e.change(Keep, kind, name, append([]string{fmt.Sprintf("not tagged %s=%s, so karpool leaves it as it is; it differs in:", prereq.OwnerTag, e.s.ClusterName)}, diffs...)...)
}

// failed wraps an API error with what was being done.
func failed(doing string, err error) error {
	return fmt.Errorf("%s: %w", doing, err)
}
