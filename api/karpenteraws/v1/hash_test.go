package v1

import (
	"testing"

	"k8s.io/utils/ptr"
)

// The hash follows the static fields only: selector terms, ipPrefixCount, the order of block
// device mappings and spelling out an alias's family leave it; user data, tags and the role
// change it.
func TestHash(t *testing.T) {
	base := func() *EC2NodeClass {
		return &EC2NodeClass{Spec: EC2NodeClassSpec{
			SubnetSelectorTerms: []SubnetSelectorTerm{{Tags: map[string]string{"a": "b"}}},
			AMISelectorTerms:    []AMISelectorTerm{{Alias: "al2023@latest"}},
			Role:                "node-role",
			BlockDeviceMappings: []*BlockDeviceMapping{{DeviceName: ptr.To("/dev/xvda")}, {DeviceName: ptr.To("/dev/xvdb")}},
		}}
	}
	h := base().Hash()
	same := map[string]func(*EC2NodeClass){
		"subnet terms":   func(nc *EC2NodeClass) { nc.Spec.SubnetSelectorTerms[0].Tags["a"] = "c" },
		"AMI terms":      func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "al2023@v20250101"}} },
		"family spelled": func(nc *EC2NodeClass) { nc.Spec.AMIFamily = ptr.To("AL2023") },
		"ipPrefixCount":  func(nc *EC2NodeClass) { nc.Spec.IPPrefixCount = ptr.To(int32(1)) },
		"device order": func(nc *EC2NodeClass) {
			d := nc.Spec.BlockDeviceMappings
			d[0], d[1] = d[1], d[0]
		},
	}
	for what, change := range same {
		nc := base()
		change(nc)
		if got := nc.Hash(); got != h {
			t.Errorf("%s changed the hash", what)
		}
	}
	differs := map[string]func(*EC2NodeClass){
		"user data": func(nc *EC2NodeClass) { nc.Spec.UserData = ptr.To("echo hi") },
		"tags":      func(nc *EC2NodeClass) { nc.Spec.Tags = map[string]string{"team": "a"} },
		"role":      func(nc *EC2NodeClass) { nc.Spec.Role = "other" },
		"family":    func(nc *EC2NodeClass) { nc.Spec.AMISelectorTerms = []AMISelectorTerm{{Alias: "bottlerocket@latest"}} },
		"device":    func(nc *EC2NodeClass) { nc.Spec.BlockDeviceMappings[1].DeviceName = ptr.To("/dev/xvdc") },
	}
	for what, change := range differs {
		nc := base()
		change(nc)
		if nc.Hash() == h {
			t.Errorf("%s left the hash as it was", what)
		}
	}
}
