package fleet

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
)

func TestPoolGroupsNodes(t *testing.T) {
	np := &karpv1.NodePool{}
	np.Name = "default"
	np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}
	p := NewPool(np)
	for _, n := range []Node{
		{InstanceType: "m5.large", CapacityType: "spot", Zone: "a", PerHour: 0.04, AllocCPU: 1930},
		{InstanceType: "c5.xlarge", CapacityType: "on-demand", Zone: "b", PerHour: 0.17, AllocCPU: 3920},
		{InstanceType: "m5.large", CapacityType: "spot", Zone: "a", PerHour: 0.04, AllocCPU: 1930},
	} {
		p.Add(n)
	}
	p.Sort()
	if p.Nodes != 3 || p.LimitCPU != 100_000 || p.LimitMem != -1 || p.AllocCPU != 7780 || len(p.Groups) != 2 {
		t.Fatalf("pool %+v", p)
	}
	if g := p.Groups[0]; g.InstanceType != "c5.xlarge" || p.Groups[1].Count != 2 || p.Groups[1].PerHour != 0.08 {
		t.Fatalf("groups %+v, want the dearer c5.xlarge first and the two m5.large together", p.Groups)
	}
}

func TestFormats(t *testing.T) {
	for got, want := range map[string]string{
		Dollars(1234.5): "$1,234.50", Dollars(-3): "-$3.00", Monthly(1): "$730.00", Signed(-2.5): "−$2.50",
		Signed(0): "+$0.00", Hourly(0.096): "$0.0960", Hourly(12.345): "$12.35", Cores(0): "0", Cores(500): "500m",
		Cores(2000): "2", Cores(3920): "3.9", GiB(4 << 30): "4Gi", GiB(7237271552): "6.7Gi", Percent(1, 0): "-", Percent(1, 3): "33 %",
	} {
		if got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
}
