// Package review says what a change to a pools repository does before it is merged: it builds
// and validates two revisions exactly as PoolSync would (reconciler/build, reconciler/validate),
// runs the same workload against both revisions' NodePools with karpool's scheduling engine
// (autoscaler/simulate), and applies the drift rules of the disruption controller to the nodes
// the base revision runs, so that reviewers see nodes, instance types, cost, pods that would no
// longer fit and nodes that would be replaced. It is what `karpool plan` prints and posts.
package review

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/disruption"
	"github.com/karpool/karpool/autoscaler/simulate"
	"github.com/karpool/karpool/internal/redact"
	"github.com/karpool/karpool/internal/unimplemented"
	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/manifests/validate"
)

// Tree is one revision of the repository.
type Tree struct {
	// Revision names it, Flux style (main@sha1:<hex>).
	Revision string
	// Files are its files by slash-separated path from the repository root.
	Files map[string][]byte
}

// Input is what to review.
type Input struct {
	Base, Head Tree
	// Path is the directory PoolSync reads (spec.path); "" for the root.
	Path string
	// Workload is the cluster's workload (a --workload file or a status snapshot); may be nil.
	// The workload objects of each revision (Deployments and the like under Path) are added.
	Workload *simulate.Workload
	// WorkloadSource says where Workload came from, for the assumptions.
	WorkloadSource string
	// Region selects the price catalog (default us-east-1).
	Region string
	// MaxPods caps each revision's workload (0: simulate.DefaultMaxPods).
	MaxPods int
	// Now is when budgets are judged (zero: time.Now).
	Now time.Time
	// Reserved are the capacity reservations the cluster's classes resolve to, which both
	// revisions are planned with (nil: none), so the plan shows reserved capacity used and
	// what falls back to on-demand.
	Reserved simulate.Reserved
	// OverlaysOff, when set, says why the revisions' NodeOverlays are not applied (the
	// cluster's NodeOverlay gate is off); empty applies them, as the controller with the gate.
	OverlaysOff string
	// Labels are the pull request's labels: the ReviewPolicy's override label among them lets
	// the change pass the blocking rules it fails.
	Labels []string
}

// Plan is the review of a change.
type Plan struct {
	Path       string `json:"path"`
	Base       *Side  `json:"base"`
	Head       *Side  `json:"head"`
	Region     string `json:"region"`
	WorkloadAt string `json:"workloadSource,omitempty"`
	// Objects are the rendered objects that differ, by ID.
	Objects []ObjectChange `json:"objects"`
	// Pools compares each NodePool present in either revision, in name order.
	Pools []PoolChange `json:"pools"`
	// Unschedulable are the pods that the head leaves without a node and the base does not;
	// Fitting the pods the base leaves without a node and the head places.
	Unschedulable []simulate.Unschedulable `json:"unschedulable"`
	Fitting       []simulate.Unschedulable `json:"fitting"`
	// Replaced are the base's nodes that the head would replace, by pool.
	Replaced []Replacement `json:"replaced"`
	// WorstCase is the head with every HorizontalPodAutoscaler at its maxReplicas; nil when
	// the workload has none or the head was not planned.
	WorstCase *WorstCase `json:"worstCase,omitempty"`
	// AWS is what the head's AWS resources (spec.aws) change in the account; nil when the
	// PoolSync renders none or the plan was made offline.
	AWS *AWSChanges `json:"aws,omitempty"`
	// Unhonored are the fields of the head's objects that karpool does not act on and that
	// the objects accept with the opt-out annotation (without it, they are validation errors).
	Unhonored []Unhonored `json:"unhonored,omitempty"`
	// Overlays say which of the head's NodeOverlays the plan does not apply, and why (the
	// cluster's gate, a conflict, an invalid price), so the plan is not read as if they did.
	Overlays []string `json:"overlays,omitempty"`
	// Guardrails is the base revision's ReviewPolicy checked against the change; nil when the
	// base has none.
	Guardrails *Guardrails `json:"guardrails,omitempty"`
}

// Unhonored is a field of an object that karpool accepts and does not act on.
type Unhonored struct {
	Object    string `json:"object"` // kind/name
	Field     string `json:"field"`
	Karpenter string `json:"karpenter"` // what Karpenter does with it
}

// unhonored lists the opted-out unimplemented fields of objs, in their order.
func unhonored(objs []*build.Object) []Unhonored {
	var out []Unhonored
	for _, o := range objs {
		if o.Object.GetAnnotations()[unimplemented.OptOutAnnotation] != unimplemented.OptOut {
			continue
		}
		for _, g := range unimplemented.In(o.Object.GetKind(), o.Object.Object) {
			out = append(out, Unhonored{Object: o.ID(), Field: g.Field(), Karpenter: g.Karpenter})
		}
	}
	return out
}

// AWSChanges is the head revision's AWS resources planned against the live account.
type AWSChanges struct {
	// Mode is spec.aws.mode: apply makes the changes when the head is merged, plan only reports.
	Mode string `json:"mode"`
	// Changes are the plan's lines ("+ IAM role KarpenterNodeRole-demo"), Summary their counts.
	Changes []string `json:"changes"`
	Summary string   `json:"summary"`
	// Error says why the account could not be planned against.
	Error string `json:"error,omitempty"`
}

// WorstCase is what the head's pools run when every HPA scales its target to maxReplicas.
type WorstCase struct {
	HPAs    []simulate.HPA           `json:"hpas"`
	PerHour float64                  `json:"perHour"`
	Pools   []simulate.PoolSummary   `json:"pools"`
	Pending []simulate.Unschedulable `json:"pending"`
	// Error says why it could not be planned (too many pods).
	Error string `json:"error,omitempty"`
}

// Side is one revision's outcome.
type Side struct {
	Revision string `json:"revision"`
	// Error is why the revision could not be built or planned (its build errors, with
	// file:line:col); Findings are its validation problems. Either means it was not planned.
	Error    string             `json:"error,omitempty"`
	Findings []validate.Finding `json:"findings,omitempty"`
	Pods     int                `json:"pods"`
	PerHour  float64            `json:"perHour"`

	planned  bool
	objs     []*build.Object
	report   *simulate.Report
	pools    *simulate.Pools
	workload *simulate.Workload
}

// Planned says whether the revision was planned (built, valid and simulated).
func (s *Side) Planned() bool { return s.planned }

// PoolChange is one NodePool in both revisions; Base or Head is nil where it is absent (or
// the revision was not planned).
type PoolChange struct {
	Name string                `json:"name"`
	Base *simulate.PoolSummary `json:"base,omitempty"`
	Head *simulate.PoolSummary `json:"head,omitempty"`
}

// Replacement is a set of nodes that drift would replace.
type Replacement struct {
	Pool   string `json:"pool"`
	Nodes  int    `json:"nodes"`
	Reason string `json:"reason"` // the disruption controller's drift reason, or NodePoolRemoved
	// Message says why, from the drift rules; AtATime is how many nodes the pool's Drifted
	// budget lets go at once.
	Message string `json:"message"`
	AtATime int    `json:"atATime"`
}

// Failed says whether the head revision cannot be applied: it does not build or is invalid.
func (p *Plan) Failed() bool { return p.Head.Error != "" || len(p.Head.Findings) > 0 }

// Changed says whether the change makes any difference to the rendered objects.
func (p *Plan) Changed() bool { return len(p.Objects) > 0 }

// Worth says whether the plan deserves a pull-request comment: the change renders other
// objects, or the head does not validate (the author needs to know where).
func (p *Plan) Worth() bool { return p.Changed() || p.Failed() }

// Make reviews a change. The error is for what is not the revisions' fault (a bad region);
// problems of the revisions are in the plan.
func Make(ctx context.Context, in Input) (*Plan, error) {
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	p := &Plan{Path: in.Path, Region: in.Region, WorkloadAt: in.WorkloadSource}
	if p.Region == "" {
		p.Region = "us-east-1"
	}
	var err error
	if p.Base, err = side(ctx, in, in.Base); err != nil {
		return nil, err
	}
	if p.Head, err = side(ctx, in, in.Head); err != nil {
		return nil, err
	}
	p.Objects = diffObjects(p.Base.objs, p.Head.objs)
	p.Unhonored = unhonored(p.Head.objs)
	if p.Head.Planned() {
		p.Overlays = p.Head.report.Overlays()
	}
	p.Pools = comparePools(p.Base, p.Head)
	if p.Base.Planned() && p.Head.Planned() {
		p.Unschedulable = newlyUnschedulable(p.Base.report, p.Head.report)
		p.Fitting = newlyUnschedulable(p.Head.report, p.Base.report)
		p.Replaced = replaced(p.Base, p.Head, in.Now)
	}
	if p.Head.Planned() {
		if p.WorstCase, err = worstCase(p.Head, in.Region); err != nil {
			return nil, err
		}
	}
	p.Guardrails = guardrails(in, p)
	return p, nil
}

// side builds, validates and plans one revision.
func side(ctx context.Context, in Input, t Tree) (*Side, error) {
	s := &Side{Revision: t.Revision}
	objs, err := build.Build(ctx, t.Files, in.Path)
	var berrs manifests.Errors
	if errors.As(err, &berrs) {
		s.Error = redact.Text(berrs.Error())
		return s, nil
	} else if err != nil {
		return nil, err
	}
	s.objs = objs
	s.Findings, err = validate.All(ctx, objs, validate.Types{}, validate.NewSchema())
	if err != nil {
		return nil, err
	}
	if len(s.Findings) > 0 {
		return s, nil
	}
	if s.pools, err = simulate.PoolsOf(objs); err != nil {
		s.Error = redact.Text(err.Error())
		return s, nil
	}
	s.pools.Reserve(in.Reserved)
	if in.OverlaysOff != "" {
		s.pools.IgnoreOverlays(in.OverlaysOff)
	}
	w := simulate.NewWorkload(in.MaxPods)
	if in.Workload != nil {
		if err := w.Merge(in.Workload); err != nil {
			s.Error = redact.Text(err.Error())
			return s, nil
		}
	}
	own, err := simulate.WorkloadOf(objs, in.MaxPods)
	if err == nil {
		err = w.Merge(own)
	}
	if err != nil {
		s.Error = redact.Text(err.Error())
		return s, nil
	}
	if s.report, err = simulate.Solve(s.pools, w, in.Region); err != nil {
		return nil, err
	}
	s.Pods, s.PerHour, s.workload, s.planned = w.Pods(), s.report.TotalPerHour, w, true
	return s, nil
}

// worstCase plans the side's workload with every HPA at its maxReplicas.
func worstCase(s *Side, region string) (*WorstCase, error) {
	hpas := s.workload.HPAs()
	if len(hpas) == 0 {
		return nil, nil
	}
	wc := &WorstCase{HPAs: hpas}
	atMax, err := s.workload.AtMax()
	if err != nil {
		wc.Error = redact.Text(err.Error())
		return wc, nil
	}
	rep, err := simulate.Solve(s.pools, atMax, region)
	if err != nil {
		return nil, err
	}
	wc.PerHour, wc.Pools, wc.Pending = rep.TotalPerHour, rep.Pools(), rep.Unschedulable
	return wc, nil
}

func comparePools(base, head *Side) []PoolChange {
	byName := map[string]*PoolChange{}
	var names []string
	add := func(s *Side, set func(*PoolChange, *simulate.PoolSummary)) {
		if !s.Planned() {
			return
		}
		for _, ps := range s.report.Pools() {
			c := byName[ps.Name]
			if c == nil {
				c = &PoolChange{Name: ps.Name}
				byName[ps.Name] = c
				names = append(names, ps.Name)
			}
			set(c, &ps)
		}
	}
	add(base, func(c *PoolChange, ps *simulate.PoolSummary) { c.Base = ps })
	add(head, func(c *PoolChange, ps *simulate.PoolSummary) { c.Head = ps })
	sort.Strings(names)
	out := make([]PoolChange, len(names))
	for i, n := range names {
		out[i] = *byName[n]
	}
	return out
}

// newlyUnschedulable are the head's unschedulable pods that the base schedules (called the
// other way round: the base's that the head schedules).
func newlyUnschedulable(base, head *simulate.Report) []simulate.Unschedulable {
	before := map[string]bool{}
	for _, u := range base.Unschedulable {
		before[u.Pod] = true
	}
	out := []simulate.Unschedulable{}
	for _, u := range head.Unschedulable {
		if !before[u.Pod] {
			out = append(out, u)
		}
	}
	return out
}

// replaced runs the disruption controller's drift rules (disruption.DriftOf) on the nodes the
// base revision plans, stamped as the base's pools and classes would stamp them, against the
// head's pools and classes. A pool the head removes loses its nodes too.
func replaced(base, head *Side, now time.Time) []Replacement {
	type key struct{ pool, reason, msg string }
	counts := map[key]int{}
	var order []key
	for _, nc := range base.report.NodeClaims {
		np := findPool(base.pools, nc.Pool)
		claim := stampedClaim(nc, np, base.pools.Class(classRef(np)))
		k := key{pool: nc.Pool}
		if hp := findPool(head.pools, nc.Pool); hp == nil {
			k.reason, k.msg = "NodePoolRemoved", fmt.Sprintf("NodePool %s is removed: its nodes are drained and deleted", nc.Pool)
		} else {
			k.reason, k.msg = disruption.DriftOf(claim, hp, head.pools.Class(classRef(hp)))
		}
		if k.reason == "" {
			continue
		}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	out := []Replacement{}
	for _, k := range order {
		r := Replacement{Pool: k.pool, Nodes: counts[k], Reason: k.reason, Message: k.msg, AtATime: counts[k]}
		if hp := findPool(head.pools, k.pool); hp != nil {
			if len(hp.Spec.Disruption.Budgets) == 0 {
				// What the API server's default (one budget of 10 %) gives a pool without budgets.
				hp = hp.DeepCopy()
				hp.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "10%"}}
			}
			if n, err := hp.AllowedDisruptions(karpv1.DisruptionReasonDrifted, counts[k], now); err == nil {
				r.AtATime = n
			}
		}
		out = append(out, r)
	}
	return out
}

// stampedClaim is a planned node as a NodeClaim the provisioner would have created: the
// template's labels, the well-known labels of its instance type, capacity type and zone, and
// the pool's and class's hashes.
func stampedClaim(nc simulate.NodeClaim, np *karpv1.NodePool, class *awsv1.EC2NodeClass) *karpv1.NodeClaim {
	labels := map[string]string{}
	for k, v := range np.Spec.Template.Labels {
		labels[k] = v
	}
	labels[karpv1.LabelNodePool] = np.Name
	labels[corev1.LabelInstanceTypeStable] = nc.InstanceType
	labels[karpv1.LabelCapacityType] = nc.CapacityType
	labels[corev1.LabelTopologyZone] = nc.Zone
	ann := map[string]string{
		karpv1.AnnotationNodePoolHash:        np.TemplateHash(),
		karpv1.AnnotationNodePoolHashVersion: karpv1.NodePoolHashVersion,
	}
	if class != nil {
		ann[awsv1.AnnotationEC2NodeClassHash] = class.Hash()
		ann[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	}
	return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: ann}}
}

func findPool(ps *simulate.Pools, name string) *karpv1.NodePool {
	for _, np := range ps.NodePools() {
		if np.Name == name {
			return np
		}
	}
	return nil
}

func classRef(np *karpv1.NodePool) string {
	if ref := np.Spec.Template.Spec.NodeClassRef; ref != nil {
		return ref.Name
	}
	return ""
}
