package simulate

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// database is a StatefulSet of two replicas with one volumeClaimTemplate, "data": its replicas'
// claims are data-db-0 and data-db-1.
const database = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: db}}
    spec:
      nodeSelector: {type: karpenter}
      containers:
        - name: db
          resources: {requests: {cpu: "1", memory: 2Gi}}
  volumeClaimTemplates:
    - metadata: {name: data}
      spec:
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 10Gi}}
`

// boundClaims binds data-db-0 and data-db-1 to EBS volumes in us-east-1c (the EBS CSI driver's
// zone key, as its volumes carry it).
const boundClaims = `---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-0}
spec: {volumeName: pv-db-0, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-1}
spec: {volumeName: pv-db-1, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: List
items:
  - apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv-db-0}
    spec: &pv
      capacity: {storage: 10Gi}
      accessModes: [ReadWriteOnce]
      csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0}
      nodeAffinity:
        required:
          nodeSelectorTerms:
            - matchExpressions:
                - {key: topology.ebs.csi.aws.com/zone, operator: In, values: [us-east-1c]}
  - apiVersion: v1
    kind: PersistentVolume
    metadata: {name: pv-db-1}
    spec: *pv
`

func simulateWorkload(t *testing.T, pools, workload string) *Report {
	t.Helper()
	dir := t.TempDir()
	rep, err := Run(context.Background(), Options{PoolsPath: write(t, dir, "pools.yaml", pools), WorkloadPath: write(t, dir, "workload.yaml", workload)})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestStatefulSetFollowsItsVolumes: replicas whose claims are bound to volumes in us-east-1c
// are planned there (without the volumes the cheapest plan is in us-east-1a).
func TestStatefulSetFollowsItsVolumes(t *testing.T) {
	rep := simulateWorkload(t, workshopPool(t), database+boundClaims)
	if len(rep.Unschedulable) != 0 || len(rep.NodeClaims) == 0 {
		t.Fatalf("nodeclaims %+v, unschedulable %+v; want both replicas planned", rep.NodeClaims, rep.Unschedulable)
	}
	pods := 0
	for _, nc := range rep.NodeClaims {
		pods += len(nc.Pods)
		if nc.Zone != "us-east-1c" {
			t.Errorf("nodeclaim %s for %v is in %s, want us-east-1c, the volumes' zone", nc.InstanceType, nc.Pods, nc.Zone)
		}
	}
	if pods != 2 {
		t.Errorf("%d pods planned, want 2", pods)
	}
	if len(rep.Warnings()) != 0 {
		t.Errorf("warnings %q", rep.Warnings())
	}
}

// TestUnboundClaimFollowsItsStorageClass: an unbound claim of a WaitForFirstConsumer class
// confines its pod to the class's allowed topologies.
func TestUnboundClaimFollowsItsStorageClass(t *testing.T) {
	rep := simulateWorkload(t, workshopPool(t), `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3-east-1b}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions:
      - {key: topology.kubernetes.io/zone, values: [us-east-1b]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: scratch, namespace: batch}
spec: {storageClassName: gp3-east-1b, accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}
---
apiVersion: v1
kind: Pod
metadata: {name: job, namespace: batch}
spec:
  nodeSelector: {type: karpenter}
  containers:
    - name: job
      resources: {requests: {cpu: 500m, memory: 1Gi}}
  volumes:
    - name: scratch
      persistentVolumeClaim: {claimName: scratch}
`)
	if len(rep.NodeClaims) != 1 || rep.NodeClaims[0].Zone != "us-east-1b" {
		t.Fatalf("nodeclaims %+v (unschedulable %+v), want one in us-east-1b", rep.NodeClaims, rep.Unschedulable)
	}
}

// TestMissingClaims: a pod whose claim the workload does not define, and StatefulSet replicas
// whose per-replica claims it does not define, are reported unschedulable with the claim in the
// reason, in the text report too; the StatefulSet gets a warning that says what to add.
func TestMissingClaims(t *testing.T) {
	rep := simulateWorkload(t, workshopPool(t), database+`---
apiVersion: v1
kind: Pod
metadata: {name: orphan}
spec:
  nodeSelector: {type: karpenter}
  containers:
    - name: c
      resources: {requests: {cpu: 100m}}
  volumes:
    - name: data
      persistentVolumeClaim: {claimName: nowhere}
`)
	want := map[string]string{
		"default/db-0":   "default/data-db-0",
		"default/db-1":   "default/data-db-1",
		"default/orphan": "default/nowhere",
	}
	if len(rep.Unschedulable) != len(want) || len(rep.NodeClaims) != 0 {
		t.Fatalf("unschedulable %+v, nodeclaims %+v; want exactly %v unschedulable", rep.Unschedulable, rep.NodeClaims, want)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, u := range rep.Unschedulable {
		claim, ok := want[u.Pod]
		if !ok || !strings.Contains(u.Reason, "claim "+claim+" does not exist") {
			t.Errorf("%s: reason %q, want one saying claim %s does not exist", u.Pod, u.Reason, claim)
		}
		if !strings.Contains(text.String(), u.Reason) {
			t.Errorf("the text report does not give %s's reason %q:\n%s", u.Pod, u.Reason, text.String())
		}
	}
	ws := rep.Warnings()
	if len(ws) != 1 || !strings.Contains(ws[0], "workload.yaml:1:1: StatefulSet \"db\"") || !strings.Contains(ws[0], "data-db-0, data-db-1") ||
		!strings.Contains(ws[0], "add the claims") {
		t.Errorf("warnings %q, want one at the StatefulSet naming data-db-0 and data-db-1 and saying to add them", ws)
	}
}

// TestVolumeZoneNoPoolServes: replicas whose volumes are in a zone the pool does not launch in
// are unschedulable, with a reason that gives the volumes' zone. (The engine's reason names the
// zone requirement, not the claim it comes from.)
func TestVolumeZoneNoPoolServes(t *testing.T) {
	pools := strings.Replace(workshopPool(t), "      requirements:\n", `      requirements:
        - key: topology.kubernetes.io/zone
          operator: In
          values: ["us-east-1a", "us-east-1b"]
`, 1)
	rep := simulateWorkload(t, pools, database+boundClaims)
	if len(rep.Unschedulable) != 2 || len(rep.NodeClaims) != 0 {
		t.Fatalf("unschedulable %+v, nodeclaims %+v; want both replicas unschedulable", rep.Unschedulable, rep.NodeClaims)
	}
	for _, u := range rep.Unschedulable {
		if !strings.Contains(u.Reason, "us-east-1c") {
			t.Errorf("%s: reason %q does not give its volume's zone us-east-1c", u.Pod, u.Reason)
		}
	}
}

// TestDuplicateVolumeObjects: a claim, volume or class defined twice is an error at the second
// definition that points at the first.
func TestDuplicateVolumeObjects(t *testing.T) {
	dir := t.TempDir()
	wl := write(t, dir, "w.yaml", boundClaims+`---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: data-db-1, namespace: default}
spec: {storageClassName: gp3}
`)
	_, err := Run(context.Background(), Options{PoolsPath: workshopPools, WorkloadPath: wl})
	if err == nil || !strings.Contains(err.Error(), "w.yaml:32:1: PersistentVolumeClaim \"data-db-1\" is also defined at "+wl+":7:1") {
		t.Fatalf("error %v, want the second data-db-1 at w.yaml:32 pointing at line 7", err)
	}
}

// TestEphemeralVolumeFollowsItsStorageClass: a Deployment's generic ephemeral volume gets the
// claim the ephemeral volume controller would create, so its class's allowed topologies place
// the replicas.
func TestEphemeralVolumeFollowsItsStorageClass(t *testing.T) {
	rep := simulateWorkload(t, workshopPool(t), `apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3-east-1b}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
  - matchLabelExpressions:
      - {key: topology.ebs.csi.aws.com/zone, values: [us-east-1b]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cache}
spec:
  replicas: 3
  template:
    spec:
      nodeSelector: {type: karpenter}
      containers:
        - name: cache
          resources: {requests: {cpu: 500m, memory: 1Gi}}
      volumes:
        - name: scratch
          ephemeral:
            volumeClaimTemplate:
              spec:
                storageClassName: gp3-east-1b
                accessModes: [ReadWriteOnce]
                resources: {requests: {storage: 1Gi}}
`)
	if len(rep.Unschedulable) != 0 || len(rep.NodeClaims) == 0 {
		t.Fatalf("nodeclaims %+v, unschedulable %+v; want the replicas planned", rep.NodeClaims, rep.Unschedulable)
	}
	for _, nc := range rep.NodeClaims {
		if nc.Zone != "us-east-1b" {
			t.Errorf("nodeclaim for %v is in %s, want us-east-1b, the class's only zone", nc.Pods, nc.Zone)
		}
	}
}
