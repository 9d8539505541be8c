// Package provisioning turns pods the kube-scheduler could not place into NodeClaims. It batches
// the pending pods (a short idle window, a longer maximum), takes a snapshot of the cluster, runs
// the one scheduling engine (autoscaler/scheduling) on it and creates the NodeClaims the engine
// plans; the nodeclaim lifecycle controller launches them.
package provisioning

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/cloud"
	"github.com/karpool/karpool/autoscaler/metrics"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/state"
)

// Options configure a Provisioner.
type Options struct {
	Provider cloud.CloudProvider
	// Region is the value of topology.kubernetes.io/region on new nodes.
	Region string
	// BatchIdle ends a batch when no new pending pod arrived for this long (default 1 s);
	// BatchMax ends it regardless (default 10 s).
	BatchIdle, BatchMax time.Duration
	// Recheck is how often pending pods are looked at again without a trigger (default 10 s):
	// after a launch failed, after a pool became ready, after capacity went away.
	Recheck  time.Duration
	Recorder record.EventRecorder
	Metrics  *metrics.Metrics
	// Nominations is where the pods planned onto NodeClaims are recorded, shared with the
	// NodeClaim lifecycle (default: a record of the provisioner's own).
	Nominations *state.Nominations
	// NodeOverlay applies the cluster's NodeOverlays to the instance types (the gate).
	NodeOverlay bool
	// Scheduling holds the operator's scheduling settings (PREFERENCE_POLICY,
	// MIN_VALUES_POLICY) for every run of the engine, provisioning and disruption alike.
	Scheduling scheduling.Options
}

// Provisioner is a manager Runnable (it runs on the leader only).
type Provisioner struct {
	client  client.Client
	opts    Options
	trigger chan struct{}

	mu sync.Mutex
	// triggered holds the pods that already extended the current batch window.
	triggered map[types.UID]bool
	// nominatedSince is when each pending pod's nomination to a node was first seen.
	nominatedSince map[types.UID]nominatedSince
	// nominatedEvents bounds the Nominated events of all pods together, as Karpenter's
	// PodNominationRateLimiter does: a decision for 1,000 pods would otherwise post 1,000
	// events while the new nodes come up, each a write the API server must make.
	nominatedEvents flowcontrol.RateLimiter
	// podEvents dedupes FailedScheduling and Nominated events per pod; now is its clock.
	podEvents eventDedupe
	now       func() time.Time
}

// New returns a Provisioner that reads from and writes through c (the manager's client, whose
// reads come from the informer cache).
func New(c client.Client, opts Options) *Provisioner {
	if opts.BatchIdle <= 0 {
		opts.BatchIdle = time.Second
	}
	if opts.BatchMax <= 0 {
		opts.BatchMax = 10 * time.Second
	}
	if opts.Recheck <= 0 {
		opts.Recheck = 10 * time.Second
	}
	if opts.Nominations == nil {
		opts.Nominations = state.NewNominations()
	}
	return &Provisioner{client: c, opts: opts, trigger: make(chan struct{}, 1),
		triggered: map[types.UID]bool{}, nominatedSince: map[types.UID]nominatedSince{},
		nominatedEvents: flowcontrol.NewTokenBucketRateLimiter(nominatedEventsPerSecond, nominatedEventsBurst), now: time.Now}
}

// Karpenter's pace for Nominated events: 5 per second, bursts of 10.
const (
	nominatedEventsPerSecond = 5
	nominatedEventsBurst     = 10
)

// Trigger asks for a provisioning round; triggers during a batch window extend the batch.
func (p *Provisioner) Trigger() {
	select {
	case p.trigger <- struct{}{}:
	default:
	}
}

// TriggerFor asks for a round for a pending pod. As in Karpenter's batcher, each pod extends a
// batch window once: the kube-scheduler rewrites the status of every pod it retries, and if
// each rewrite extended the window, rounds on a busy cluster would all wait for BatchMax.
func (p *Provisioner) TriggerFor(pod types.UID) {
	p.mu.Lock()
	seen := p.triggered[pod]
	p.triggered[pod] = true
	p.mu.Unlock()
	if !seen {
		p.Trigger()
	}
}

// Start runs provisioning rounds until ctx ends.
func (p *Provisioner) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("provisioner")
	ctx = log.IntoContext(ctx, logger)
	// The first snapshot starts the cache's informers for the kinds no controller watches
	// (PDBs, volumes, namespaces...) and waits for their first list: 0.6 s on a busy API
	// server, which would otherwise delay the first round of a scale-out.
	if _, err := state.Take(ctx, p.client); err != nil && ctx.Err() == nil {
		logger.Error(err, "warming the cache")
	}
	recheck := time.NewTicker(p.opts.Recheck)
	defer recheck.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.trigger:
			if !p.batch(ctx) {
				return nil
			}
		case <-recheck.C:
		}
		if err := p.Provision(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "provisioning failed")
		}
	}
}

// batch waits until pending pods stop arriving (BatchIdle without a trigger) or BatchMax has
// passed, so that a Deployment scaled up is planned in one round instead of pod by pod. It
// returns false when ctx ended.
func (p *Provisioner) batch(ctx context.Context) bool {
	defer p.endWindow()
	idle := time.NewTimer(p.opts.BatchIdle)
	defer idle.Stop()
	maxWait := time.NewTimer(p.opts.BatchMax)
	defer maxWait.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-p.trigger:
			idle.Reset(p.opts.BatchIdle)
		case <-idle.C:
			return true
		case <-maxWait.C:
			return true
		}
	}
}

// endWindow lets every pod extend the next batch window again.
func (p *Provisioner) endWindow() {
	p.mu.Lock()
	clear(p.triggered)
	p.mu.Unlock()
}

// Provision runs one round: snapshot, plan, create NodeClaims.
func (p *Provisioner) Provision(ctx context.Context) error {
	logger := log.FromContext(ctx)
	start := time.Now()
	c, err := state.Take(ctx, p.client)
	if err != nil {
		return err
	}
	pools, skipped := p.Pools(ctx, c)
	p.opts.Nominations.Forget(c)
	p.mu.Lock()
	stale := staleNominations(c, p.opts.Nominations.ExpectedNodes(), p.nominatedSince, time.Now())
	p.mu.Unlock()
	in := p.input(c, pools)
	p.clearNominations(ctx, stale)
	if len(in.Pods) == 0 {
		if p.opts.Metrics != nil {
			p.opts.Metrics.UnschedulablePods.WithLabelValues(metrics.ControllerProvisioner).Set(0)
		}
		return nil
	}
	logger.Info("found provisionable pod(s)", "Pods", podNames(in.Pods), "duration", time.Since(start).String())
	res := p.solve(in, metrics.ControllerProvisioner)
	planned := 0
	for i := range res.NodeClaims {
		planned += len(res.NodeClaims[i].Pods)
	}
	if len(res.NodeClaims) > 0 {
		logger.Info("computed new nodeclaim(s) to fit pod(s)", "nodeclaims", len(res.NodeClaims), "pods", planned)
	}
	poolByName := map[string]*karpv1.NodePool{}
	for _, pl := range pools {
		poolByName[pl.NodePool.Name] = pl.NodePool
	}
	if placed := res.Placements(); len(placed) > 0 {
		logger.Info("found room for pod(s) on existing and in-flight capacity", "Pods", len(placed), "nodes", placedOn(placed))
		p.nominateInFlight(placed, in.NodeClaims)
	}
	created, errs := p.createNodeClaims(ctx, res.NodeClaims, poolByName, "provisioning")
	p.reportUnschedulable(ctx, res.Unschedulable, skipped)
	if err := p.waitForCache(ctx, created); err != nil {
		return err
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// nominateInFlight nominates the pods the plan puts into the room of in-flight NodeClaims to
// them: later rounds count that room as taken (as for the pods of the NodeClaims they
// created), and the pods' events say where they will run.
func (p *Provisioner) nominateInFlight(placements []scheduling.Binding, inFlight []scheduling.InFlightNodeClaim) {
	names := make(map[string]bool, len(inFlight))
	for _, f := range inFlight {
		names[f.NodeClaim.Name] = true
	}
	for _, b := range placements {
		if names[b.Node] { // not an existing node: the kube-scheduler binds those pods
			p.nominate([]*corev1.Pod{b.Pod}, b.Node)
		}
	}
}

// nominate records that the pods will run on the NodeClaim and says so in an event on each,
// as Karpenter does: once per pod within nominatedDedupe, and at most nominatedEvents' pace.
func (p *Provisioner) nominate(pods []*corev1.Pod, claim string) {
	p.opts.Nominations.Nominate(claim, pods...)
	if p.opts.Recorder != nil {
		now := p.now()
		for _, pod := range pods {
			if p.podEvents.first("Nominated", pod.UID, now, nominatedDedupe) && p.nominatedEvents.TryAccept() {
				p.opts.Recorder.Eventf(pod, corev1.EventTypeNormal, "Nominated", "Pod should schedule on: nodeclaim/%s", claim)
			}
		}
	}
}

// placedOn names the nodes and in-flight NodeClaims of the placements, sorted, once each.
func placedOn(placed []scheduling.Binding) string {
	var names []string
	for _, b := range placed {
		if !slices.Contains(names, b.Node) {
			names = append(names, b.Node)
		}
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// createParallelism bounds the NodeClaims created at once (Karpenter creates 10 at a time).
// One by one they were created about 3 per second against the local API server, and the next
// batch waited for the whole decision.
const createParallelism = 10

// createNodeClaims creates the planned NodeClaims, createParallelism at a time, and nominates
// each one's pods to it. It returns the names created, in plan order, and the errors. reason is
// the metric's label: provisioning, or the disruption that needs a replacement.
func (p *Provisioner) createNodeClaims(ctx context.Context, planned []scheduling.NodeClaim, poolByName map[string]*karpv1.NodePool, reason string) ([]string, []string) {
	logger := log.FromContext(ctx)
	names := make([]string, len(planned))
	failed := make([]string, len(planned))
	workqueue.ParallelizeUntil(ctx, createParallelism, len(planned), func(i int) {
		rc := &planned[i]
		np := poolByName[rc.Pool]
		nc := newNodeClaim(np, rc)
		if err := p.client.Create(ctx, nc); err != nil {
			failed[i] = fmt.Sprintf("create nodeclaim for pool %s: %v", rc.Pool, err)
			return
		}
		names[i] = nc.Name
		logger.Info("created nodeclaim", "NodePool", klog.KRef("", np.Name), "NodeClaim", klog.KRef("", nc.Name),
			"requests", nc.Spec.Resources.Requests, "instance-types", instanceTypeNames(rc))
		if p.opts.Metrics != nil {
			p.opts.Metrics.NodeClaimsCreated.WithLabelValues(reason, np.Name, "false").Inc()
		}
		p.nominate(rc.Pods, nc.Name)
	})
	var created, errs []string
	for i := range planned {
		if names[i] != "" {
			created = append(created, names[i])
		}
		if failed[i] != "" {
			errs = append(errs, failed[i])
		}
	}
	p.opts.Nominations.Decided(created)
	return created, errs
}

// Pools resolves every NodePool whose node class is ready to the instance types the cloud
// offers for that class, with the NodeOverlays applied (NodeOverlay gate). Pools that cannot
// launch anything are returned by name with the reason, for the unschedulable pods' events.
func (p *Provisioner) Pools(ctx context.Context, c *state.Cluster) ([]scheduling.Pool, map[string]string) {
	pools, skipped := p.basePools(ctx, c)
	return p.overlaid(ctx, pools), skipped
}

// basePools is Pools before the overlays.
func (p *Provisioner) basePools(ctx context.Context, c *state.Cluster) ([]scheduling.Pool, map[string]string) {
	var out []scheduling.Pool
	skipped := map[string]string{}
	for _, np := range c.NodePools {
		if np.DeletionTimestamp != nil {
			skipped[np.Name] = "is being deleted"
			continue
		}
		class, why := c.NodeClassReady(np)
		if class == nil {
			skipped[np.Name] = why
			continue
		}
		its, err := p.opts.Provider.InstanceTypes(ctx, class)
		if err != nil {
			skipped[np.Name] = fmt.Sprintf("instance types of EC2NodeClass %q: %v", class.Name, err)
			continue
		}
		out = append(out, scheduling.Pool{NodePool: np, InstanceTypes: its})
	}
	return out, skipped
}

// input is the engine's input for the snapshot, with the operator's scheduling settings.
func (p *Provisioner) input(c *state.Cluster, pools []scheduling.Pool) *scheduling.Input {
	in := input(c, pools, p.opts.Nominations.Planned(), p.opts.Region)
	in.Options = p.opts.Scheduling
	return in
}

// SimulateWithout runs the engine on the cluster as if the named nodes, and the nodes already
// being deleted, were gone: the pods that would have to leave them are pending, with the other
// pending pods, in-flight NodeClaims and their nominated pods as a provisioning round sees
// them. Disruption asks it whether nodes can go, and with what in their place; the pods still
// on a draining node need room too, or the decision taken while a drain runs would not hold.
func (p *Provisioner) SimulateWithout(c *state.Cluster, pools []scheduling.Pool, nodes map[string]bool) *scheduling.Result {
	in, _ := p.without(c, pools, nodes)
	return p.solve(in, metrics.ControllerDisruption)
}

// SimulateConsolidation is SimulateWithout for a consolidation move at now: as in Karpenter
// v1.14, the pods moved off the named nodes may not land on a node still within its NodePool's
// consolidateAfter (pods already pending, and those of nodes being deleted, may).
func (p *Provisioner) SimulateConsolidation(c *state.Cluster, pools []scheduling.Pool, nodes map[string]bool, now time.Time) *scheduling.Result {
	in, moved := p.without(c, pools, nodes)
	keepMovedPodsOffSettling(c, in, moved, now)
	return p.solve(in, metrics.ControllerDisruption)
}

// without is the engine's input with the named nodes, and those being deleted, gone: their pods
// pending (copies; the snapshot's stay bound). moved are the copies of the named nodes' pods.
func (p *Provisioner) without(c *state.Cluster, pools []scheduling.Pool, nodes map[string]bool) (in *scheduling.Input, moved []*corev1.Pod) {
	in = p.input(c, pools)
	gone := maps.Clone(nodes)
	for _, nc := range c.NodeClaims {
		if node := c.NodeFor(nc); node != nil && (nc.DeletionTimestamp != nil || node.DeletionTimestamp != nil) {
			gone[node.Name] = true
		}
	}
	kept := in.Nodes[:0:0]
	for _, n := range in.Nodes {
		if !gone[n.Node.Name] {
			kept = append(kept, n)
			continue
		}
		for _, pod := range n.Pods {
			if pod.DeletionTimestamp == nil && state.Reschedulable(pod) {
				cp := *pod
				cp.Spec.NodeName = ""
				in.Pods = append(in.Pods, &cp)
				if nodes[n.Node.Name] {
					moved = append(moved, &cp)
				}
			}
		}
	}
	in.Options.CostLimitSlack = freedCost(pools, in.Nodes, nodes)
	in.Nodes = kept
	return in, moved
}

// freedCost is, per NodePool, what the named nodes cost at the offerings they were bought as:
// what their replacements may spend in a pool at its cost limit (scheduling.Options).
func freedCost(pools []scheduling.Pool, all []scheduling.ExistingNode, names map[string]bool) map[string]float64 {
	byPool := map[string][]catalog.InstanceType{}
	for _, pl := range pools {
		byPool[pl.NodePool.Name] = pl.InstanceTypes
	}
	freed := map[string]float64{}
	for _, n := range all {
		if !names[n.Node.Name] {
			continue
		}
		pool := n.Node.Labels[karpv1.LabelNodePool]
		if o, ok := catalog.OfferingOf(byPool[pool], n.Node.Labels); ok {
			freed[pool] += o.PricePerHour
		}
	}
	return freed
}

// solve runs the engine, timed under the controller that asked.
func (p *Provisioner) solve(in *scheduling.Input, controller string) *scheduling.Result {
	start := time.Now()
	res := scheduling.Solve(in)
	if p.opts.Metrics != nil {
		p.opts.Metrics.SchedulingDuration.WithLabelValues(controller).Observe(time.Since(start).Seconds())
	}
	return res
}

// Replace creates NodeClaims a disruption decision planned (reason: the metric's label, e.g.
// underutilized) and returns their names.
func (p *Provisioner) Replace(ctx context.Context, planned []scheduling.NodeClaim, pools []scheduling.Pool, reason string) ([]string, error) {
	poolByName := map[string]*karpv1.NodePool{}
	for _, pl := range pools {
		poolByName[pl.NodePool.Name] = pl.NodePool
	}
	created, errs := p.createNodeClaims(ctx, planned, poolByName, reason)
	if len(errs) > 0 {
		return created, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return created, p.waitForCache(ctx, created)
}

// reportUnschedulable records a FailedScheduling event on each pod no capacity was found for
// (once per pod within failedSchedulingDedupe), naming the reason (a pool limit, taints,
// requirements...), and says which pools were skipped.
func (p *Provisioner) reportUnschedulable(ctx context.Context, pods []scheduling.Unschedulable, skipped map[string]string) {
	if p.opts.Metrics != nil {
		p.opts.Metrics.UnschedulablePods.WithLabelValues(metrics.ControllerProvisioner).Set(float64(len(pods)))
	}
	if len(pods) == 0 {
		return
	}
	var note string
	if len(skipped) > 0 {
		var parts []string
		for _, name := range sortedKeys(skipped) {
			parts = append(parts, fmt.Sprintf("NodePool %q skipped: %s", name, skipped[name]))
		}
		note = "; " + strings.Join(parts, "; ")
	}
	logger := log.FromContext(ctx)
	now := p.now()
	for _, u := range pods {
		logger.Info("could not schedule pod", "Pod", klog.KObj(u.Pod), "reason", u.Reason+note)
		if p.opts.Recorder != nil && p.podEvents.first("FailedScheduling", u.Pod.UID, now, failedSchedulingDedupe) {
			p.opts.Recorder.Eventf(u.Pod, corev1.EventTypeWarning, "FailedScheduling", "Failed to schedule pod, %s%s", u.Reason, note)
		}
	}
}

// waitForCache returns once the informer cache holds the NodeClaims just created, so the next
// round does not plan the same pods again from a stale view.
func (p *Provisioner) waitForCache(ctx context.Context, names []string) error {
	if len(names) == 0 {
		return nil
	}
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		missing := 0
		for _, name := range names {
			if err := p.client.Get(ctx, client.ObjectKey{Name: name}, &karpv1.NodeClaim{}); err != nil {
				missing++
			}
		}
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%d of %d new NodeClaims did not appear in the cache within 30s", missing, len(names))
		case <-tick.C:
		}
	}
}

func podNames(pods []*corev1.Pod) string {
	const shown = 20
	var b strings.Builder
	for i, p := range pods {
		if i == shown {
			fmt.Fprintf(&b, " and %d other(s)", len(pods)-shown)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(p.Namespace + "/" + p.Name)
	}
	return b.String()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
