package simulate

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/yaml"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/karpenter/v1alpha1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	capreservation "github.com/karpool/karpool/autoscaler/cloud/aws/capacityreservation"
	"github.com/karpool/karpool/autoscaler/overlay"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/manifests/build"
	"github.com/karpool/karpool/manifests/build/confined"
	"github.com/karpool/karpool/manifests/validate"
)

// doc is one built object (reconciler/build: kustomize or plain YAML) with where it came from.
type doc struct {
	obj  *build.Object
	src  build.Source
	raw  []byte // the object as built, in JSON
	meta metav1.TypeMeta
	name string
}

func (d *doc) where() string { return d.src.String() }

// at is file:line:col of a field of the document, or of the document when the field is not
// in its source.
func (d *doc) at(field ...string) string {
	if line, col, _ := d.src.Find(field); line > 0 {
		return fmt.Sprintf("%s:%d:%d", d.src.File, line, col)
	}
	return d.where()
}

func docsOf(objs []*build.Object) ([]doc, error) {
	out := make([]doc, 0, len(objs))
	for _, o := range objs {
		raw, err := o.Object.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", o.Source, err)
		}
		gvk := o.Object.GroupVersionKind()
		out = append(out, doc{obj: o, src: o.Source, raw: raw, name: o.Object.GetName(),
			meta: metav1.TypeMeta{APIVersion: gvk.GroupVersion().String(), Kind: gvk.Kind}})
	}
	return out, nil
}

// load reads a file or a directory the way PoolSync reads spec.path (reconciler/build): a
// directory with a kustomization is built with kustomize, any other is read as plain YAML,
// recursively. Every object keeps its file and line.
func load(ctx context.Context, path string) ([]doc, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	var objs []*build.Object
	if st.IsDir() {
		top, aerr := filepath.Abs(path)
		if aerr != nil {
			return nil, aerr
		}
		objs, err = build.LoadDir(ctx, path, top)
	} else {
		data, rerr := readFile(path)
		if rerr != nil {
			return nil, rerr
		}
		objs, err = build.LoadFile(ctx, path, data)
	}
	if err != nil {
		return nil, err
	}
	return docsOf(objs)
}

// readFile reads a workload or pools file within the cap a build reads from one file.
func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	max := confined.Defaults.FileBytes
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s: the file is larger than the %s a build reads from one file", path, confined.Size(max))
	}
	return data, nil
}

// Pools is the NodePools and EC2NodeClasses of a build.
type Pools struct {
	pools   []*karpv1.NodePool
	classes map[string]*awsv1.EC2NodeClass
	where   map[string]string // pool name -> file:line:col
	// reserved are the capacity reservations each class may launch into (Reserve).
	reserved Reserved
	// overlays are the NodeOverlays of the build, applied to the pools' instance types unless
	// overlaysOff says why not (IgnoreOverlays).
	overlays     []v1alpha1.NodeOverlay
	overlayWhere map[string]string
	overlaysOff  string
}

// IgnoreOverlays plans without the build's NodeOverlays, for the reason given (the cluster's
// NodeOverlay gate is off); the plan's warnings say so.
func (ps *Pools) IgnoreOverlays(reason string) { ps.overlaysOff = reason }

// Reserved are capacity reservations by EC2NodeClass name, as the cluster resolves them.
type Reserved map[string][]Reservation

// Reservation is one capacity reservation and how many more instances it can take.
type Reservation struct {
	awsv1.CapacityReservation
	Available int
}

// Reserve plans the pools with these capacity reservations: a class's instance types gain
// the reserved offerings of the reservations listed under its name (the pools files hold no
// status; the cluster's classes of the same name say what they resolve to).
func (ps *Pools) Reserve(r Reserved) { ps.reserved = r }

// reservedOfferings adds the class's reserved offerings to its instance types.
func (ps *Pools) reservedOfferings(class string, its []catalog.InstanceType) []catalog.InstanceType {
	rs := ps.reserved[class]
	if len(rs) == 0 {
		return its
	}
	crs := make([]awsv1.CapacityReservation, len(rs))
	room := map[string]int{}
	for i, r := range rs {
		crs[i], room[r.ID] = r.CapacityReservation, r.Available
	}
	return capreservation.WithOfferings(its, crs, func(id string) int { return room[id] })
}

func loadPools(ctx context.Context, path string) (*Pools, error) {
	ps, err := LoadPools(ctx, path)
	if err == nil && len(ps.pools) == 0 {
		err = fmt.Errorf("%s: no karpenter.sh/v1 NodePool found", path)
	}
	return ps, err
}

// LoadPools reads the NodePools and EC2NodeClasses of a file or directory as PoolSync reads
// them (a kustomization is built); it may find none.
func LoadPools(ctx context.Context, path string) (*Pools, error) {
	docs, err := load(ctx, path)
	if err != nil {
		return nil, err
	}
	return poolsOf(docs)
}

// PoolsOf is the NodePools and EC2NodeClasses among built objects.
func PoolsOf(objs []*build.Object) (*Pools, error) {
	docs, err := docsOf(objs)
	if err != nil {
		return nil, err
	}
	return poolsOf(docs)
}

// NodePools are the pools, in name order.
func (ps *Pools) NodePools() []*karpv1.NodePool { return ps.pools }

// Class is the EC2NodeClass of that name, or nil.
func (ps *Pools) Class(name string) *awsv1.EC2NodeClass { return ps.classes[name] }

// Classes are the EC2NodeClasses, in name order.
func (ps *Pools) Classes() []awsv1.EC2NodeClass {
	out := make([]awsv1.EC2NodeClass, 0, len(ps.classes))
	for _, nc := range ps.classes {
		out = append(out, *nc)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// MaxNodePools bounds the NodePools one revision may hold for simulate and plan: the engine
// keeps each pool's view of the catalog (up to ~200 KB for a pool open to every type), and a
// pull request must not be able to take the planner's memory with a long list of pools.
const MaxNodePools = 5_000

// poolsOf decodes the NodePools and EC2NodeClasses among docs, skipping other kinds. They are
// checked first as PoolSync checks them (validate.Types): a misspelt field or a retired API
// version is an error at its file:line:col.
func poolsOf(docs []doc) (*Pools, error) {
	objs := make([]*build.Object, len(docs))
	for i := range docs {
		objs[i] = docs[i].obj
	}
	if fs, _ := (validate.Types{}).Validate(context.Background(), objs); len(fs) > 0 {
		errs := make([]error, len(fs))
		for i, f := range fs {
			errs[i] = errors.New(f.String())
		}
		return nil, errors.Join(errs...)
	}
	ps := &Pools{classes: map[string]*awsv1.EC2NodeClass{}, where: map[string]string{}, overlayWhere: map[string]string{}}
	for i := range docs {
		d := &docs[i]
		switch {
		case d.meta.Kind == "NodePool" && d.meta.APIVersion == karpv1.GroupVersion.String():
			np := &karpv1.NodePool{}
			if err := yaml.Unmarshal(d.raw, np); err != nil {
				return nil, fmt.Errorf("%s: NodePool %q: %w", d.where(), d.name, err)
			}
			if prev, dup := ps.where[np.Name]; dup {
				return nil, fmt.Errorf("%s: NodePool %q is also defined at %s", d.where(), np.Name, prev)
			}
			if len(ps.pools) == MaxNodePools {
				return nil, fmt.Errorf("%s: NodePool %q is one more than the %d NodePools karpool plans at once: split the pools over several paths (PoolSyncs)", d.where(), np.Name, MaxNodePools)
			}
			ps.where[np.Name] = d.where()
			ps.pools = append(ps.pools, np)
		case d.meta.Kind == "EC2NodeClass" && d.meta.APIVersion == awsv1.GroupVersion.String():
			nc := &awsv1.EC2NodeClass{}
			if err := yaml.Unmarshal(d.raw, nc); err != nil {
				return nil, fmt.Errorf("%s: EC2NodeClass %q: %w", d.where(), d.name, err)
			}
			ps.classes[nc.Name] = nc
		case d.meta.Kind == "NodeOverlay" && d.meta.APIVersion == v1alpha1.GroupVersion.String():
			o := v1alpha1.NodeOverlay{}
			if err := yaml.Unmarshal(d.raw, &o); err != nil {
				return nil, fmt.Errorf("%s: NodeOverlay %q: %w", d.where(), d.name, err)
			}
			ps.overlays = append(ps.overlays, o)
			ps.overlayWhere[o.Name] = d.where()
		default:
			// Pool directories often hold other manifests too: skip them quietly.
		}
	}
	sort.SliceStable(ps.pools, func(i, j int) bool { return ps.pools[i].Name < ps.pools[j].Name })
	return ps, nil
}

// DefaultMaxPods is how many pods a workload may expand to unless told otherwise: ten times
// the largest benchmark, and far below what would exhaust memory. A pull request can ask for
// any replica count; without a cap, replicas: 100000000 would take gigabytes before failing.
const DefaultMaxPods = 100_000

// Workload is what a workload file adds to the simulation.
type Workload struct {
	maxPods    int
	pods       []*corev1.Pod
	daemonSets []*appsv1.DaemonSet
	// claims, volumes and classes give the pods' volumes their topology: a claim bound to a
	// volume with node affinity confines its pods to it, an unbound claim to its class's
	// allowed topologies.
	claims  []*corev1.PersistentVolumeClaim
	volumes []*corev1.PersistentVolume
	classes []*storagev1.StorageClass
	// defined is where each claim, volume and class is defined, by kind/namespace/name.
	defined map[string]string
	// owners are the Deployments, ReplicaSets and StatefulSets whose replicas are pods, and
	// hpas the HorizontalPodAutoscalers that scale them.
	owners []*owner
	hpas   []HPA
}

// NewWorkload returns an empty workload that may hold maxPods pods (0: DefaultMaxPods).
func NewWorkload(maxPods int) *Workload {
	if maxPods <= 0 {
		maxPods = DefaultMaxPods
	}
	return &Workload{maxPods: maxPods, defined: map[string]string{}}
}

// Pods is the number of pods of the workload.
func (w *Workload) Pods() int { return len(w.pods) }

// room checks that n more pods fit under the cap, before they are made.
func (w *Workload) room(n int64, where, what string) error {
	if total := int64(len(w.pods)) + n; total > int64(w.maxPods) {
		return fmt.Errorf("%s: %s asks for %d pods, which makes the workload %d pods, more than the %d karpool plans at most: lower it, or raise the cap (--max-pods)", where, what, n, total, w.maxPods)
	}
	return nil
}

// addTo adds the workload to a scheduling input.
func (w *Workload) addTo(in *scheduling.Input) {
	in.Pods = append(in.Pods, w.pods...)
	in.DaemonSets = append(in.DaemonSets, w.daemonSets...)
	in.PersistentVolumeClaims = append(in.PersistentVolumeClaims, w.claims...)
	in.PersistentVolumes = append(in.PersistentVolumes, w.volumes...)
	in.StorageClasses = append(in.StorageClasses, w.classes...)
}

// define records where a claim, volume or class is defined; a second definition is an error.
func (w *Workload) define(d *doc, namespace string) error {
	key := d.meta.Kind + "/" + namespace + "/" + d.name
	if prev, dup := w.defined[key]; dup {
		return fmt.Errorf("%s: %s %q is also defined at %s: remove one of them", d.where(), d.meta.Kind, d.name, prev)
	}
	w.defined[key] = d.where()
	return nil
}

// LoadWorkload reads a workload: a CSV of shapes (.csv), or Kubernetes YAML, a file or a
// directory read as PoolSync reads spec.path. It holds at most maxPods pods (0: DefaultMaxPods).
func LoadWorkload(ctx context.Context, path string, maxPods int) (*Workload, []string, error) {
	if strings.EqualFold(filepath.Ext(path), ".csv") {
		data, err := readFile(path)
		if err != nil {
			return nil, nil, err
		}
		w, err := loadCSV(path, data, maxPods)
		return w, nil, err
	}
	docs, err := load(ctx, path)
	if err != nil {
		return nil, nil, err
	}
	return workloadOf(docs, maxPods)
}

// WorkloadOf is the workload among built objects (Pods, Deployments, ReplicaSets,
// StatefulSets, DaemonSets and the volume objects); other kinds are skipped without a warning.
func WorkloadOf(objs []*build.Object, maxPods int) (*Workload, error) {
	docs, err := docsOf(objs)
	if err != nil {
		return nil, err
	}
	kept := docs[:0]
	for _, d := range docs {
		if workloadKinds[d.meta.Kind] {
			kept = append(kept, d)
		}
	}
	w, _, err := workloadOf(kept, maxPods)
	return w, err
}

// workloadKinds are the kinds a workload is made of.
var workloadKinds = map[string]bool{"Pod": true, "Deployment": true, "ReplicaSet": true, "StatefulSet": true,
	"DaemonSet": true, "PersistentVolumeClaim": true, "PersistentVolume": true, "StorageClass": true,
	"HorizontalPodAutoscaler": true}

// Merge adds o's objects to w; a claim, volume or class defined in both is an error. The cap
// is w's.
func (w *Workload) Merge(o *Workload) error {
	if err := w.room(int64(len(o.pods)), "workload", "adding the repository's workload"); err != nil {
		return err
	}
	for key, at := range o.defined {
		if prev, dup := w.defined[key]; dup {
			return fmt.Errorf("%s: %s is also defined at %s: remove one of them", at, key, prev)
		}
		w.defined[key] = at
	}
	w.pods = append(w.pods, o.pods...)
	w.daemonSets = append(w.daemonSets, o.daemonSets...)
	w.claims = append(w.claims, o.claims...)
	w.volumes = append(w.volumes, o.volumes...)
	w.classes = append(w.classes, o.classes...)
	for _, ow := range o.owners {
		moved := *ow
		moved.start += len(w.pods) - len(o.pods)
		w.owners = append(w.owners, &moved)
	}
	w.hpas = append(w.hpas, o.hpas...)
	return nil
}

// workloadOf turns the workload kinds among docs into pods, daemonsets and volume objects.
func workloadOf(docs []doc, maxPods int) (*Workload, []string, error) {
	w := NewWorkload(maxPods)
	var warnings []string
	var invalid []error
	var statefulSets []*statefulSetClaims
	for i := range docs {
		d := &docs[i]
		if err := checkResources(d); err != nil {
			invalid = append(invalid, err)
			continue
		}
		switch d.meta.Kind {
		case "Pod":
			p := &corev1.Pod{}
			if err := yaml.Unmarshal(d.raw, p); err != nil {
				return nil, nil, fmt.Errorf("%s: Pod %q: %w", d.where(), d.name, err)
			}
			if p.Spec.NodeName != "" {
				warnings = append(warnings, fmt.Sprintf("%s: Pod %q is bound to node %s; simulated as pending", d.where(), p.Name, p.Spec.NodeName))
				p.Spec.NodeName = ""
			}
			defaultNamespace(&p.ObjectMeta)
			w.pods = append(w.pods, p)
		case "Deployment", "ReplicaSet", "StatefulSet":
			var replicas *int32
			var tmpl corev1.PodTemplateSpec
			var meta metav1.ObjectMeta
			var sts *statefulSetClaims
			switch d.meta.Kind {
			case "Deployment":
				o := &appsv1.Deployment{}
				if err := yaml.Unmarshal(d.raw, o); err != nil {
					return nil, nil, fmt.Errorf("%s: Deployment %q: %w", d.where(), d.name, err)
				}
				replicas, tmpl, meta = o.Spec.Replicas, o.Spec.Template, o.ObjectMeta
			case "ReplicaSet":
				o := &appsv1.ReplicaSet{}
				if err := yaml.Unmarshal(d.raw, o); err != nil {
					return nil, nil, fmt.Errorf("%s: ReplicaSet %q: %w", d.where(), d.name, err)
				}
				replicas, tmpl, meta = o.Spec.Replicas, o.Spec.Template, o.ObjectMeta
			default:
				o := &appsv1.StatefulSet{}
				if err := yaml.Unmarshal(d.raw, o); err != nil {
					return nil, nil, fmt.Errorf("%s: StatefulSet %q: %w", d.where(), d.name, err)
				}
				replicas, tmpl, meta = o.Spec.Replicas, o.Spec.Template, o.ObjectMeta
				if len(o.Spec.VolumeClaimTemplates) > 0 {
					sts = &statefulSetClaims{d: d}
					statefulSets = append(statefulSets, sts)
				}
				for _, ct := range o.Spec.VolumeClaimTemplates {
					sts.templates = append(sts.templates, ct.Name)
				}
			}
			n := int32(1)
			if replicas != nil {
				n = *replicas
			}
			if n < 0 {
				return nil, nil, fmt.Errorf("%s: %s %q: spec.replicas is %d: a replica count is 0 or more", d.at("spec", "replicas"), d.meta.Kind, d.name, n)
			}
			if err := w.room(int64(n), d.at("spec", "replicas"), fmt.Sprintf("%s %q: spec.replicas", d.meta.Kind, d.name)); err != nil {
				return nil, nil, err
			}
			defaultNamespace(&meta)
			o := &owner{kind: d.meta.Kind, namespace: meta.Namespace, name: meta.Name, template: tmpl, sts: sts, start: len(w.pods), replicas: int(n)}
			w.owners = append(w.owners, o)
			w.pods = append(w.pods, o.expand(0, int(n))...)
		case "HorizontalPodAutoscaler":
			h, err := hpaOf(d)
			if err != nil {
				return nil, nil, err
			}
			w.hpas = append(w.hpas, h)
		case "DaemonSet":
			o := &appsv1.DaemonSet{}
			if err := yaml.Unmarshal(d.raw, o); err != nil {
				return nil, nil, fmt.Errorf("%s: DaemonSet %q: %w", d.where(), d.name, err)
			}
			defaultNamespace(&o.ObjectMeta)
			w.daemonSets = append(w.daemonSets, o)
		case "PersistentVolumeClaim":
			o := &corev1.PersistentVolumeClaim{}
			if err := yaml.Unmarshal(d.raw, o); err != nil {
				return nil, nil, fmt.Errorf("%s: PersistentVolumeClaim %q: %w", d.where(), d.name, err)
			}
			defaultNamespace(&o.ObjectMeta)
			if err := w.define(d, o.Namespace); err != nil {
				return nil, nil, err
			}
			w.claims = append(w.claims, o)
		case "PersistentVolume":
			o := &corev1.PersistentVolume{}
			if err := yaml.Unmarshal(d.raw, o); err != nil {
				return nil, nil, fmt.Errorf("%s: PersistentVolume %q: %w", d.where(), d.name, err)
			}
			if err := w.define(d, ""); err != nil {
				return nil, nil, err
			}
			w.volumes = append(w.volumes, o)
		case "StorageClass":
			o := &storagev1.StorageClass{}
			if err := yaml.Unmarshal(d.raw, o); err != nil {
				return nil, nil, fmt.Errorf("%s: StorageClass %q: %w", d.where(), d.name, err)
			}
			if err := w.define(d, ""); err != nil {
				return nil, nil, err
			}
			w.classes = append(w.classes, o)
		default:
			warnings = append(warnings, fmt.Sprintf("%s: %s %q ignored (simulate reads Pods, Deployments, ReplicaSets, StatefulSets, DaemonSets, HorizontalPodAutoscalers, PersistentVolumeClaims, PersistentVolumes and StorageClasses)", d.where(), d.meta.Kind, d.name))
		}
	}
	if len(invalid) > 0 {
		return nil, nil, errors.Join(invalid...)
	}
	for _, s := range statefulSets {
		warnings = append(warnings, w.missingClaims(s)...)
	}
	w.addEphemeralClaims()
	return w, warnings, nil
}

// addEphemeralClaims adds the claims of the pods' generic ephemeral volumes that the workload
// does not define, as the ephemeral volume controller creates them before the pod is scheduled:
// <pod>-<volume>, unbound, with the volume's claim template.
func (w *Workload) addEphemeralClaims() {
	for _, p := range w.pods {
		for _, v := range p.Spec.Volumes {
			e := v.Ephemeral
			if e == nil || e.VolumeClaimTemplate == nil {
				continue
			}
			name := p.Name + "-" + v.Name
			if _, ok := w.defined["PersistentVolumeClaim/"+p.Namespace+"/"+name]; ok {
				continue
			}
			w.claims = append(w.claims, &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace},
				Spec:       *e.VolumeClaimTemplate.Spec.DeepCopy(),
			})
		}
	}
}

// statefulSetClaims are the replicas of a StatefulSet with volumeClaimTemplates.
type statefulSetClaims struct {
	d         *doc
	templates []string // the volumeClaimTemplates' names
	pods      []*corev1.Pod
}

// addClaims gives a replica its claims as the StatefulSet controller does: for each template,
// a volume of the template's name (replacing a pod template volume of that name) on the claim
// <template>-<pod>, where the pod is <statefulset>-<ordinal>.
func (s *statefulSetClaims) addClaims(p *corev1.Pod) {
	for _, t := range s.templates {
		v := corev1.Volume{Name: t, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: t + "-" + p.Name}}}
		replaced := false
		for i := range p.Spec.Volumes {
			if p.Spec.Volumes[i].Name == t {
				p.Spec.Volumes[i], replaced = v, true
			}
		}
		if !replaced {
			p.Spec.Volumes = append(p.Spec.Volumes, v)
		}
	}
	s.pods = append(s.pods, p)
}

// missingClaims warns about the per-replica claims of a StatefulSet that the workload does not
// define. The StatefulSet controller would create them; simulate does not invent them, since
// their volumes' zones decide where the replicas can run: the engine reports those replicas
// unschedulable, and the warning says how to give the claims.
func (w *Workload) missingClaims(s *statefulSetClaims) []string {
	var missing []string
	for _, p := range s.pods {
		for _, t := range s.templates {
			if _, ok := w.defined["PersistentVolumeClaim/"+p.Namespace+"/"+t+"-"+p.Name]; !ok {
				missing = append(missing, t+"-"+p.Name)
			}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	list := strings.Join(missing, ", ")
	if len(missing) > 3 {
		list = fmt.Sprintf("%s and %d more", strings.Join(missing[:3], ", "), len(missing)-3)
	}
	return []string{fmt.Sprintf("%s: StatefulSet %q: the workload has no PersistentVolumeClaim %s (namespace %s), so those replicas are unschedulable: add the claims of its volumeClaimTemplates, bound to PersistentVolumes (volumeName) or with a storageClassName, to the workload file",
		s.d.where(), s.d.name, list, s.pods[0].Namespace)}
}

func defaultNamespace(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = "default"
	}
}

// CSVColumns documents the workload CSV format.
const CSVColumns = `A workload CSV has a header row and one row per Deployment-like shape. Columns:
  name       (required) pods are named <name>-<i>, labelled app=<name>
  replicas   (required) number of pods
  cpu        (required) cpu request per pod, a Kubernetes quantity (250m, 2)
  memory     (required) memory request per pod (512Mi, 4Gi)
  namespace  (optional) default "default"
  ephemeral-storage, nvidia.com/gpu, aws.amazon.com/neuron, amd.com/gpu (optional) requests
  node-selector (optional) key=value pairs separated by ';'
  labels     (optional) extra pod labels, key=value pairs separated by ';'
Unknown columns are an error. Lines starting with # are comments.`

func loadCSV(path string, data []byte, maxPods int) (*Workload, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comment = '#'
	r.TrimLeadingSpace = true
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: empty CSV; expected a header row (name,replicas,cpu,memory,...)", path)
	}
	col := map[string]int{}
	known := map[string]bool{"name": true, "replicas": true, "cpu": true, "memory": true, "namespace": true, "ephemeral-storage": true,
		"nvidia.com/gpu": true, "aws.amazon.com/neuron": true, "amd.com/gpu": true, "node-selector": true, "labels": true}
	for i, h := range rows[0] {
		h = strings.ToLower(strings.TrimSpace(h))
		if !known[h] {
			return nil, fmt.Errorf("%s:1: unknown column %q\n%s", path, h, CSVColumns)
		}
		col[h] = i
	}
	for _, req := range []string{"name", "replicas", "cpu", "memory"} {
		if _, ok := col[req]; !ok {
			return nil, fmt.Errorf("%s:1: missing column %q\n%s", path, req, CSVColumns)
		}
	}
	get := func(row []string, c string) string {
		if i, ok := col[c]; ok && i < len(row) {
			return strings.TrimSpace(row[i])
		}
		return ""
	}
	w := NewWorkload(maxPods)
	for n, row := range rows[1:] {
		line := n + 2
		name := get(row, "name")
		if name == "" {
			return nil, fmt.Errorf("%s:%d: empty name", path, line)
		}
		replicas, err := strconv.Atoi(get(row, "replicas"))
		if err != nil || replicas < 0 {
			return nil, fmt.Errorf("%s:%d: replicas %q is not a non-negative integer", path, line, get(row, "replicas"))
		}
		req := corev1.ResourceList{}
		for _, r := range []string{"cpu", "memory", "ephemeral-storage", "nvidia.com/gpu", "aws.amazon.com/neuron", "amd.com/gpu"} {
			v := get(row, r)
			if v == "" {
				continue
			}
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("%s:%d: %s %q: %v", path, line, r, v, err)
			}
			if q.Sign() < 0 {
				return nil, fmt.Errorf("%s:%d: %s %s is negative: a request must be 0 or more", path, line, r, v)
			}
			req[corev1.ResourceName(r)] = q
		}
		labels := map[string]string{"app": name}
		if err := parsePairs(get(row, "labels"), labels); err != nil {
			return nil, fmt.Errorf("%s:%d: labels: %v", path, line, err)
		}
		var sel map[string]string
		if v := get(row, "node-selector"); v != "" {
			sel = map[string]string{}
			if err := parsePairs(v, sel); err != nil {
				return nil, fmt.Errorf("%s:%d: node-selector: %v", path, line, err)
			}
		}
		ns := get(row, "namespace")
		if ns == "" {
			ns = "default"
		}
		if err := w.room(int64(replicas), fmt.Sprintf("%s:%d", path, line), "replicas"); err != nil {
			return nil, err
		}
		for i := 0; i < replicas; i++ {
			w.pods = append(w.pods, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", name, i), Namespace: ns, Labels: labels},
				Spec: corev1.PodSpec{NodeSelector: sel, Containers: []corev1.Container{{
					Name: name, Resources: corev1.ResourceRequirements{Requests: req},
				}}},
			})
		}
	}
	return w, nil
}

func parsePairs(s string, into map[string]string) error {
	for _, kv := range strings.Split(s, ";") {
		kv = strings.TrimSpace(kv)
		if kv == "" {
			continue
		}
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return fmt.Errorf("%q is not key=value", kv)
		}
		into[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return nil
}

// podSpecAt is where each workload kind keeps its pod spec.
var podSpecAt = map[string][]string{
	"Pod":         {"spec"},
	"Deployment":  {"spec", "template", "spec"},
	"ReplicaSet":  {"spec", "template", "spec"},
	"StatefulSet": {"spec", "template", "spec"},
	"DaemonSet":   {"spec", "template", "spec"},
}

// checkResources makes the API server's checks on the resources of a workload's pod spec (as
// k8s.io/kubernetes pkg/apis/core/validation does on create): resource names, well-formed and
// non-negative quantities, whole numbers for extended resources, requests no higher than
// limits, and equal to them for resources that cannot be overcommitted (extended resources,
// hugepages). The API server would refuse such a workload; planning it anyway would plan a
// negative request as nothing. The checks run on the YAML, before decoding, so that every
// problem is reported at its line and column.
func checkResources(d *doc) error {
	at, ok := podSpecAt[d.meta.Kind]
	if !ok {
		return nil
	}
	var root yamlv3.Node
	if yamlv3.Unmarshal(d.raw, &root) != nil || len(root.Content) == 0 {
		return nil // not an object that decodes: the typed decode says why
	}
	spec := nodeAt(root.Content[0], at...)
	if spec == nil {
		return nil
	}
	c := &resourceCheck{d: d}
	for _, list := range []string{"initContainers", "containers"} {
		for i, ctr := range seqOf(nodeAt(spec, list)) {
			if r := nodeAt(ctr, "resources"); r != nil {
				c.requirements(r, field(at...).with(list, strconv.Itoa(i), "resources"), containerResourceName)
			}
		}
	}
	if r := nodeAt(spec, "resources"); r != nil {
		c.requirements(r, field(at...).with("resources"), podResourceName)
	}
	return errors.Join(c.errs...)
}

// fieldPath is a field of a document as map keys and list indexes.
type fieldPath []string

func field(sel ...string) fieldPath { return sel }

func (f fieldPath) with(sel ...string) fieldPath { return append(append(fieldPath{}, f...), sel...) }

// String is the Kubernetes way of writing a field: spec.containers[0].resources.
func (f fieldPath) String() string {
	var b strings.Builder
	for i, s := range f {
		if _, err := strconv.Atoi(s); err == nil {
			fmt.Fprintf(&b, "[%s]", s)
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(s)
	}
	return b.String()
}

// maxQuantity is the largest quantity whose thousandths fit in an int64, as the engine counts
// cpu (in millicores) and everything else: past it, MilliValue would overflow, and 1e18 cores
// would read as a pod that fits anywhere.
var maxQuantity = *resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)

// resourceCheck collects the problems of one document.
type resourceCheck struct {
	d    *doc
	errs []error
}

// quantity is one entry of a requests or limits map.
type quantity struct {
	name string
	q    resource.Quantity
	at   fieldPath
}

// fail records a problem at a field of the document: file:line:col of the field in its source
// file, then the object and field.
func (c *resourceCheck) fail(at fieldPath, format string, args ...any) {
	c.failAt(at, at, format, args...)
}

// failAt is fail for a problem of field shown at the position of the field pos.
func (c *resourceCheck) failAt(pos, at fieldPath, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("%s: %s %q: %s: %s", c.d.at(pos...), c.d.meta.Kind, c.d.name, at, fmt.Sprintf(format, args...)))
}

// requirements checks one resources block (a container's or the pod's).
func (c *resourceCheck) requirements(r *yamlv3.Node, at fieldPath, nameProblem func(corev1.ResourceName) string) {
	limits := c.quantities(nodeAt(r, "limits"), at.with("limits"), nameProblem)
	requests := c.quantities(nodeAt(r, "requests"), at.with("requests"), nameProblem)
	byName := map[string]quantity{}
	for _, l := range limits {
		byName[l.name] = l
	}
	var hugePages *quantity
	cpuOrMemory := false
	for _, q := range append(limits, requests...) {
		if strings.HasPrefix(q.name, corev1.ResourceHugePagesPrefix) && hugePages == nil {
			hugePages = &q
		}
		cpuOrMemory = cpuOrMemory || q.name == string(corev1.ResourceCPU) || q.name == string(corev1.ResourceMemory)
	}
	for _, req := range requests {
		lim, limited := byName[req.name]
		overcommit := overcommitAllowed(corev1.ResourceName(req.name))
		switch {
		case limited && !overcommit && req.q.Cmp(lim.q) != 0:
			c.fail(req.at, "request %s must equal the limit %s: %s cannot be overcommitted; set both to the same value", req.q.String(), lim.q.String(), req.name)
		case limited && req.q.Cmp(lim.q) > 0:
			c.fail(req.at, "request %s is above the limit %s: lower the request or raise the limit", req.q.String(), lim.q.String())
		case !limited && !overcommit:
			c.fail(req.at, "%s is requested without a limit: it cannot be overcommitted, so set limits.%s to the same value", req.name, req.name)
		}
	}
	if hugePages != nil && !cpuOrMemory {
		c.failAt(hugePages.at, at, "%s needs a cpu or memory request or limit as well: add one", hugePages.name)
	}
}

// quantities reads a requests or limits map, reporting bad names and quantities.
func (c *resourceCheck) quantities(m *yamlv3.Node, at fieldPath, nameProblem func(corev1.ResourceName) string) []quantity {
	var out []quantity
	for i := 0; m != nil && m.Kind == yamlv3.MappingNode && i+1 < len(m.Content); i += 2 {
		key, val := m.Content[i], m.Content[i+1]
		f := at.with(key.Value)
		if msg := nameProblem(corev1.ResourceName(key.Value)); msg != "" {
			c.fail(f, "%q %s", key.Value, msg)
			continue
		}
		if val.Kind != yamlv3.ScalarNode || val.Tag == "!!null" {
			c.fail(f, "expected a quantity such as 250m, 2 or 512Mi")
			continue
		}
		q, err := resource.ParseQuantity(strings.TrimSpace(val.Value))
		switch {
		case err != nil:
			c.fail(f, "%q is not a quantity: write it like 250m, 2 or 1.5 for cpu, 512Mi or 4Gi for memory", val.Value)
		case q.Sign() < 0:
			c.fail(f, "%s is negative: a quantity must be 0 or more", val.Value)
		case q.Cmp(maxQuantity) > 0:
			c.fail(f, "%s is too large: karpool counts quantities in thousandths, up to about 9.2e15", val.Value)
		case isExtendedResource(corev1.ResourceName(key.Value)) && q.MilliValue()%1000 != 0:
			c.fail(f, "%s is not a whole number: %s is counted in whole devices", val.Value, key.Value)
		default:
			out = append(out, quantity{name: key.Value, q: q, at: f})
		}
	}
	return out
}

// containerResourceName says what is wrong with a container's resource name, as the API
// server's validation does: a standard resource (cpu, memory, ephemeral-storage, hugepages-*)
// or an extended resource with a domain (nvidia.com/gpu).
func containerResourceName(name corev1.ResourceName) string {
	if errs := validation.IsQualifiedName(string(name)); len(errs) > 0 {
		return "is not a resource name: " + strings.Join(errs, "; ")
	}
	switch {
	case !strings.Contains(string(name), "/"):
		if name == corev1.ResourceCPU || name == corev1.ResourceMemory || name == corev1.ResourceEphemeralStorage || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			return ""
		}
		return "is not a container resource: use cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource with its domain such as nvidia.com/gpu"
	case !isNativeResource(name) && !isExtendedResource(name):
		return "does not follow the extended resource name standard (domain/name, such as nvidia.com/gpu)"
	}
	return ""
}

// podResourceName says what is wrong with a pod-level resource name (spec.resources).
func podResourceName(name corev1.ResourceName) string {
	if msg := containerResourceName(name); msg != "" {
		return msg
	}
	if !resourcehelper.IsSupportedPodLevelResource(name) {
		return "is not supported at pod level: pod-level resources take cpu, memory and hugepages-<size>; request others per container"
	}
	return ""
}

// isNativeResource: an unqualified name, or one in the kubernetes.io domain.
func isNativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

// isExtendedResource: a resource outside kubernetes.io whose quota name ("requests.<name>")
// is a qualified name.
func isExtendedResource(name corev1.ResourceName) bool {
	if isNativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

// overcommitAllowed: native resources other than hugepages may be requested below their limit.
func overcommitAllowed(name corev1.ResourceName) bool {
	return isNativeResource(name) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// nodeAt follows mapping keys from n; nil when one is missing.
func nodeAt(n *yamlv3.Node, keys ...string) *yamlv3.Node {
	for _, k := range keys {
		if n == nil || n.Kind != yamlv3.MappingNode {
			return nil
		}
		var next *yamlv3.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == k {
				next = n.Content[i+1]
			}
		}
		n = next
	}
	return n
}

func seqOf(n *yamlv3.Node) []*yamlv3.Node {
	if n == nil || n.Kind != yamlv3.SequenceNode {
		return nil
	}
	return n.Content
}

// applyOverlays applies the build's NodeOverlays to the input's pools, as the controller does
// with the NodeOverlay gate on, and words what did not apply as warnings.
func (ps *Pools) applyOverlays(in *scheduling.Input) []string {
	if len(ps.overlays) == 0 {
		return nil
	}
	if ps.overlaysOff != "" {
		return []string{fmt.Sprintf("%d NodeOverlays not applied: %s", len(ps.overlays), ps.overlaysOff)}
	}
	var verdicts []overlay.Verdict
	in.Pools, verdicts = overlay.Apply(ps.overlays, in.Pools)
	var out []string
	for _, v := range verdicts {
		if !v.Applied() {
			out = append(out, fmt.Sprintf("%s: NodeOverlay %q is not applied (%s): %s", ps.overlayWhere[v.Name], v.Name, v.Reason, v.Message))
		}
		if len(v.Unmodelled) > 0 {
			out = append(out, fmt.Sprintf("%s: NodeOverlay %q: spec.capacity %s: karpool does not schedule on these resources; pods requesting them stay unschedulable", ps.overlayWhere[v.Name], v.Name, strings.Join(v.Unmodelled, ", ")))
		}
	}
	return out
}
