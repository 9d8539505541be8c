package operator_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
	"github.com/karpool/karpool/autoscaler/state"
)

// switchoverPool is the NodePool the Karpenter in TestSwitchoverFromKarpenter managed: m5.large
// only, so the nodes it left behind (one 4Gi pod each) are what karpool would launch as well, and
// consolidation has nothing cheaper to offer.
const switchoverPool = `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  template:
    metadata:
      labels:
        type: karpenter
    spec:
      requirements:
        - {key: node.kubernetes.io/instance-type, operator: In, values: ["m5.large"]}
        - {key: karpenter.sh/capacity-type, operator: In, values: ["on-demand"]}
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}
  disruption:
    consolidationPolicy: WhenEmptyOrUnderutilized
    consolidateAfter: 0s
`

// TestSwitchoverFromKarpenter moves a cluster from Karpenter to karpool. A Karpenter (played by
// the test: its Lease, and NodeClaims, instances and Nodes written as Karpenter v1 writes them)
// runs two m5.large nodes with a pod each. karpool, started as a process with leader election,
// does not act while Karpenter renews its Lease, although a third pod waits for capacity, and
// says why. Once Karpenter releases its Lease, karpool leads, provisions the third pod, and adopts
// Karpenter's NodeClaims: re-stamped with its hashes, judged by consolidation and kept, none
// drifted, deleted or replaced.
func TestSwitchoverFromKarpenter(t *testing.T) {
	h := newHarness(t)
	ns := h.namespace("switchover")
	h.apply("", writeManifest(t, "pool.yaml", switchoverPool), repoFile("examples", "workshop", "ec2nodeclass.yaml"))
	pool := &karpv1.NodePool{}
	if err := h.c.Get(h.ctx, client.ObjectKey{Name: "default"}, pool); err != nil {
		t.Fatal(err)
	}
	k := newKarpenter(h)
	k.lead()
	adopted := map[string]adoptedClaim{}
	for range 2 {
		nc := k.launch(pool, "m5.large")
		adopted[nc.Name] = adoptedClaim{uid: nc.UID, node: nc.Status.NodeName, instance: nc.Status.ProviderID}
	}
	h.apply(ns, writeManifest(t, "big.yaml", deployment("big", 2, "100m", "4Gi", "type: karpenter")))
	before := h.runningPods(ns, "big", 2, 2*time.Minute)

	proc := h.startProcess("--leader-elect", "--namespace", h.namespace("karpool-system"))
	h.scale(ns, "big", 3)
	h.eventually("karpool says why it waits", time.Minute, func() error {
		if !strings.Contains(proc.log(), k.holder) || !proc.logs("not acting") {
			return fmt.Errorf("no line naming Karpenter's holder yet")
		}
		return nil
	})
	// Karpenter keeps leading for longer than a provisioning batch (10 s at most) while the third
	// pod is unschedulable: karpool must not have acted meanwhile.
	h.eventually("the third pod unschedulable", time.Minute, func() error {
		var pods corev1.PodList
		if err := h.c.List(h.ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "big"}); err != nil {
			return err
		}
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Reason == corev1.PodReasonUnschedulable {
					return nil
				}
			}
		}
		return fmt.Errorf("no pod marked unschedulable yet")
	})
	from := k.renewals.Load()
	h.eventually("Karpenter renews its Lease for 12 s", time.Minute, func() error {
		if n := k.renewals.Load() - from; n < 6 {
			return fmt.Errorf("%d renewals", n)
		}
		return nil
	})
	if n := len(h.nodeClaims()); n != 2 || proc.logs("acting as leader") {
		t.Fatalf("karpool acted while Karpenter led: %d NodeClaims, log:\n%s", n, tail(proc.log(), 20))
	}

	k.release()
	h.eventually("karpool leads", time.Minute, func() error {
		if !proc.logs("acting as leader") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	h.runningPods(ns, "big", 3, 3*time.Minute)
	h.eventually("Karpenter's NodeClaims adopted and judged by consolidation", 2*time.Minute, func() error {
		for _, nc := range h.nodeClaims() {
			if _, ok := adopted[nc.Name]; !ok {
				continue
			}
			if nc.Annotations[karpv1.AnnotationNodePoolHashVersion] != karpv1.NodePoolHashVersion ||
				nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
				return fmt.Errorf("NodeClaim %s not re-stamped: %v", nc.Name, nc.Annotations)
			}
			// Kept with a reason: the pass looked at it and decided not to disrupt it.
			if c := state.Condition(&nc, karpv1.ConditionTypeConsolidatable); c == nil || c.Message == "" {
				return fmt.Errorf("NodeClaim %s not judged yet: %v", nc.Name, c)
			}
		}
		return nil
	})
	claims := h.nodeClaims()
	if len(claims) != 3 {
		t.Errorf("want Karpenter's 2 NodeClaims and 1 new, got %d", len(claims))
	}
	for _, nc := range claims {
		was, ok := adopted[nc.Name]
		if !ok {
			continue
		}
		if nc.UID != was.uid || nc.DeletionTimestamp != nil || nc.Status.NodeName != was.node || nc.Status.ProviderID != was.instance {
			t.Errorf("NodeClaim %s was replaced or is being deleted: %+v", nc.Name, nc.ObjectMeta)
		}
		if c := state.Condition(&nc, karpv1.ConditionTypeDrifted); c != nil && c.Status == metav1.ConditionTrue {
			t.Errorf("NodeClaim %s drifted: %s", nc.Name, c.Message)
		}
		delete(adopted, nc.Name)
	}
	if len(adopted) != 0 {
		t.Errorf("Karpenter's NodeClaims gone: %v", slices.Collect(maps.Keys(adopted)))
	}
	for _, p := range before {
		var now corev1.Pod
		if err := h.c.Get(h.ctx, client.ObjectKeyFromObject(&p), &now); err != nil || now.Spec.NodeName != p.Spec.NodeName {
			t.Errorf("pod %s moved or went (%v)", p.Name, err)
		}
	}
	for _, msg := range []string{"consolidation decided; validating", "disrupting node(s)"} {
		if proc.logs(msg) {
			t.Errorf("karpool disrupted Karpenter's nodes: %q in\n%s", msg, tail(proc.log(), 30))
		}
	}
}

// adoptedClaim identifies a NodeClaim Karpenter left, with its node and instance.
type adoptedClaim struct {
	uid            types.UID
	node, instance string
}

// karpenter plays a Karpenter v1 controller that ran the cluster before karpool: it holds
// Karpenter's leader-election Lease and launches nodes as Karpenter does — an instance with
// Karpenter's tags and AL2023 user data, a NodeClaim with its labels, hash annotations (of
// Karpenter's hash versions), finalizer and owner, and the Node registered and initialized.
type karpenter struct {
	h        *harness
	holder   string
	lease    client.ObjectKey
	renewals atomic.Int64
	stop     context.CancelFunc
	stopped  chan struct{}
}

func newKarpenter(h *harness) *karpenter {
	return &karpenter{h: h, holder: "karpenter-5c8f7d9b4-" + rand.String(5) + "_" + rand.String(8),
		lease: client.ObjectKey{Namespace: "kube-system", Name: "karpenter-leader-election"}}
}

// lead takes Karpenter's Lease and renews it every 2 s (client-go's retry period) until release.
func (k *karpenter) lead() {
	h := k.h
	now := metav1.NewMicroTime(time.Now())
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: k.lease.Namespace, Name: k.lease.Name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(k.holder), LeaseDurationSeconds: ptr.To[int32](15), AcquireTime: &now, RenewTime: &now}}
	if err := h.c.Create(h.ctx, lease); err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	k.stop, k.stopped = cancel, make(chan struct{})
	h.t.Cleanup(func() {
		k.release()
		_ = h.c.Delete(context.Background(), lease)
	})
	go func() {
		defer close(k.stopped)
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				// Released as client-go releases on cancel: no holder, a 1 s duration.
				k.renew(lease, func(l *coordinationv1.Lease) {
					l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To(""), ptr.To[int32](1)
				})
				return
			case <-tick.C:
				k.renew(lease, func(*coordinationv1.Lease) {})
				k.renewals.Add(1)
			}
		}
	}()
}

func (k *karpenter) renew(lease *coordinationv1.Lease, change func(*coordinationv1.Lease)) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := k.h.c.Get(ctx, k.lease, lease); err != nil {
		k.h.t.Errorf("Karpenter's Lease: %v", err)
		return
	}
	now := metav1.NewMicroTime(time.Now())
	lease.Spec.RenewTime = &now
	change(lease)
	if err := k.h.c.Update(ctx, lease); err != nil {
		k.h.t.Errorf("renewing Karpenter's Lease: %v", err)
	}
}

// release stops Karpenter: its Lease is released (again: nothing).
func (k *karpenter) release() {
	k.stop()
	<-k.stopped
}

// launch launches one node of the instance type for the pool (and its class, "default"), as
// Karpenter's provisioner, launch and registration would, and returns its NodeClaim.
func (k *karpenter) launch(pool *karpv1.NodePool, instanceType string) *karpv1.NodeClaim {
	h := k.h
	cfg := h.sim.AWSConfig()
	ec2c := ec2.NewFromConfig(cfg)
	discovery := []ec2types.Filter{{Name: aws.String("tag:karpenter.sh/discovery"), Values: []string{clusterName}}}
	subnets, err := ec2c.DescribeSubnets(h.ctx, &ec2.DescribeSubnetsInput{Filters: discovery})
	if err != nil || len(subnets.Subnets) == 0 {
		h.t.Fatalf("subnets: %v", err)
	}
	subnet := subnets.Subnets[0]
	groups, err := ec2c.DescribeSecurityGroups(h.ctx, &ec2.DescribeSecurityGroupsInput{Filters: discovery})
	if err != nil || len(groups.SecurityGroups) == 0 {
		h.t.Fatalf("security groups: %v", err)
	}
	cluster, err := eks.NewFromConfig(cfg).DescribeCluster(h.ctx, &eks.DescribeClusterInput{Name: aws.String(clusterName)})
	if err != nil {
		h.t.Fatal(err)
	}
	version := aws.ToString(cluster.Cluster.Version)
	param, err := ssm.NewFromConfig(cfg).GetParameter(h.ctx, &ssm.GetParameterInput{
		Name: aws.String("/aws/service/eks/optimized-ami/" + version + "/amazon-linux-2023/x86_64/standard/recommended/image_id")})
	if err != nil {
		h.t.Fatal(err)
	}
	cat, err := catalog.Load(cfg.Region)
	if err != nil {
		h.t.Fatal(err)
	}
	it, ok := cat.InstanceType(instanceType, catalog.NodeClassOptions{AMIFamily: catalog.AMIFamilyAL2023})
	if !ok {
		h.t.Fatalf("%s not in the catalog", instanceType)
	}

	name := pool.Name + "-" + rand.String(5)
	zone := aws.ToString(subnet.AvailabilityZone)
	labels := maps.Clone(it.Labels)
	maps.Copy(labels, pool.Spec.Template.Labels)
	maps.Copy(labels, map[string]string{karpv1.LabelNodePool: pool.Name, awsv1.LabelNodeClass: pool.Spec.Template.Spec.NodeClassRef.Name,
		karpv1.LabelCapacityType: karpv1.CapacityTypeOnDemand, corev1.LabelTopologyZone: zone})
	tags := []ec2types.Tag{}
	for key, v := range map[string]string{"karpenter.sh/nodeclaim": name, karpv1.LabelNodePool: pool.Name,
		awsv1.LabelNodeClass: pool.Spec.Template.Spec.NodeClassRef.Name, "kubernetes.io/cluster/" + clusterName: "owned",
		"eks:eks-cluster-name": clusterName, "Name": karpv1.LabelNodePool + "/" + pool.Name} {
		tags = append(tags, ec2types.Tag{Key: aws.String(key), Value: aws.String(v)})
	}
	run, err := ec2c.RunInstances(h.ctx, &ec2.RunInstancesInput{
		ImageId: param.Parameter.Value, InstanceType: ec2types.InstanceType(instanceType), MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		SubnetId: subnet.SubnetId, SecurityGroupIds: []string{aws.ToString(groups.SecurityGroups[0].GroupId)},
		UserData: aws.String(karpenterUserData(cluster.Cluster, labels)),
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags}},
	})
	if err != nil {
		h.t.Fatal(err)
	}
	providerID := fmt.Sprintf("aws:///%s/%s", zone, aws.ToString(run.Instances[0].InstanceId))

	var reqs []karpv1.NodeSelectorRequirementWithMinValues
	for _, r := range pool.Spec.Template.Spec.Requirements {
		reqs = append(reqs, karpv1.NodeSelectorRequirementWithMinValues(r))
	}
	for _, key := range []string{karpv1.LabelNodePool, "type"} {
		reqs = append(reqs, karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: corev1.NodeSelectorOpIn, Values: []string{labels[key]}})
	}
	nc := &karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Finalizers: []string{karpv1.TerminationFinalizer},
			Annotations: map[string]string{
				// Karpenter's hashes under its own versions: karpool cannot compare them with its
				// own, and re-stamps them.
				karpv1.AnnotationNodePoolHash: "6891240527283949374", karpv1.AnnotationNodePoolHashVersion: "v3",
				awsv1.AnnotationEC2NodeClassHash: "15503728375633640217", awsv1.AnnotationEC2NodeClassHashVersion: "v5",
				"karpenter.k8s.aws/tagged": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "karpenter.sh/v1", Kind: "NodePool", Name: pool.Name, UID: pool.UID, BlockOwnerDeletion: ptr.To(true)}}},
		Spec: karpv1.NodeClaimSpec{Requirements: reqs, NodeClassRef: pool.Spec.Template.Spec.NodeClassRef,
			ExpireAfter: pool.Spec.Template.Spec.ExpireAfter, TerminationGracePeriod: pool.Spec.Template.Spec.TerminationGracePeriod,
			Resources: karpv1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("4Gi")}}},
	}
	if err := h.c.Create(h.ctx, nc); err != nil {
		h.t.Fatal(err)
	}
	launched := metav1.Now()
	nc.Status.ProviderID, nc.Status.ImageID = providerID, aws.ToString(param.Parameter.Value)
	nc.SetCondition(karpv1.ConditionTypeLaunched, metav1.ConditionTrue, "Launched", "", launched)
	if err := h.c.Status().Update(h.ctx, nc); err != nil {
		h.t.Fatal(err)
	}

	node := k.register(nc)
	now := metav1.Now()
	nc.Status.NodeName, nc.Status.Capacity, nc.Status.Allocatable = node.Name, node.Status.Capacity, node.Status.Allocatable
	nc.Status.LastPodEventTime = now
	for _, c := range []string{karpv1.ConditionTypeRegistered, karpv1.ConditionTypeInitialized, karpv1.ConditionTypeReady} {
		nc.SetCondition(c, metav1.ConditionTrue, c, "", now)
	}
	if err := h.c.Status().Update(h.ctx, nc); err != nil {
		h.t.Fatal(err)
	}
	return nc
}

// register waits for the instance's Node (the simulator's kubelet) and registers and initializes
// it as Karpenter does: its labels, the termination finalizer, the NodeClaim as owner, and no
// unregistered taint.
func (k *karpenter) register(nc *karpv1.NodeClaim) *corev1.Node {
	h := k.h
	node := &corev1.Node{}
	h.eventually("Karpenter's node "+nc.Name+" registers", time.Minute, func() error {
		var nodes corev1.NodeList
		if err := h.c.List(h.ctx, &nodes); err != nil {
			return err
		}
		for i := range nodes.Items {
			if nodes.Items[i].Spec.ProviderID == nc.Status.ProviderID {
				*node = nodes.Items[i]
				return nil
			}
		}
		return fmt.Errorf("no node with %s", nc.Status.ProviderID)
	})
	patch := client.MergeFrom(node.DeepCopy())
	node.Labels[karpv1.LabelNodeRegistered], node.Labels[karpv1.LabelNodeInitialized] = "true", "true"
	node.Finalizers = append(node.Finalizers, karpv1.TerminationFinalizer)
	node.OwnerReferences = append(node.OwnerReferences, metav1.OwnerReference{APIVersion: "karpenter.sh/v1", Kind: "NodeClaim",
		Name: nc.Name, UID: nc.UID, BlockOwnerDeletion: ptr.To(true)})
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == karpv1.TaintKeyUnregistered })
	if err := h.c.Patch(h.ctx, node, patch); err != nil {
		h.t.Fatal(err)
	}
	return node
}

// karpenterUserData is the AL2023 user data Karpenter writes: a MIME multi-part with a nodeadm
// NodeConfig, the NodeClaim's labels the kubelet may set, and the unregistered taint.
func karpenterUserData(cluster *ekstypes.Cluster, labels map[string]string) string {
	var kv []string
	for _, key := range slices.Sorted(maps.Keys(labels)) {
		if domain, _, _ := strings.Cut(key, "/"); !strings.HasSuffix(domain, "kubernetes.io") {
			kv = append(kv, key+"="+labels[key])
		}
	}
	doc := fmt.Sprintf(`MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  cluster:
    name: %s
    apiServerEndpoint: %s
    certificateAuthority: %s
    cidr: %s
  kubelet:
    config:
      maxPods: 29
    flags:
    - --node-labels="%s"
    - --register-with-taints="%s=:NoExecute"

--//--
`, aws.ToString(cluster.Name), aws.ToString(cluster.Endpoint), aws.ToString(cluster.CertificateAuthority.Data),
		aws.ToString(cluster.KubernetesNetworkConfig.ServiceIpv4Cidr), strings.Join(kv, ","), karpv1.TaintKeyUnregistered)
	return base64.StdEncoding.EncodeToString([]byte(doc))
}
