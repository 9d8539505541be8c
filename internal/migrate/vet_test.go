package migrate

import (
	"bytes"
	"testing"

	"github.com/karpool/karpool/schema"
)

// TestMigratedOutputVetsClean runs the CUE schema (what `karpool vet` uses) over every migrated
// seed and synthetic set: no errors. Warnings (lints) are allowed; they are logged.
func TestMigratedOutputVetsClean(t *testing.T) {
	for _, set := range e2eSets(t) {
		r := Files(set)
		if n := r.Errors(); n > 0 {
			t.Fatalf("%d migration errors: %v", n, r.Diagnostics)
		}
		for _, o := range r.Outputs {
			// Seed 000 is a template its walkthrough fills in with the shell (export
			// EKSCLUSTER_NAME="eksworkshop"); vet takes a role literally and refuses "${".
			data := bytes.ReplaceAll(o.Data, []byte("${EKSCLUSTER_NAME}"), []byte("eksworkshop"))
			findings, err := schema.ValidateDocuments(o.Name, data)
			if err != nil {
				t.Errorf("%s: %v", o.Name, err)
				continue
			}
			for _, f := range findings {
				if f.Severity == schema.Error {
					t.Errorf("migrated output rejected by the schema: %s", f)
				} else {
					t.Logf("lint: %s", f)
				}
			}
		}
	}
}

// The control: the same check rejects the seed before migration (deprecated API version) and a
// migrated class with its role removed.
func TestVetRejectsUnmigratedInput(t *testing.T) {
	in := readFile(t, seedDir+"/004-weasel/nodepool-ec2nodeclass.yaml")
	findings, err := schema.ValidateDocuments(in.Name, in.Data)
	if err != nil {
		t.Fatal(err)
	}
	if findings.Errors() == 0 {
		t.Errorf("v1beta1 seed passed the schema: %v", findings)
	}
	for _, f := range findings {
		t.Logf("%s", f)
	}
	r := migrateFiles(t, readFile(t, seedDir+"/000-spot-dedicated/karpenter-provisioner1.yaml"))
	broken := bytes.Replace(r.Outputs[0].Data, []byte("  role: KarpenterNodeRole-${EKSCLUSTER_NAME}\n"), nil, 1)
	if bytes.Equal(broken, r.Outputs[0].Data) {
		t.Fatal("role line not found in the migrated output")
	}
	findings, err = schema.ValidateDocuments("broken.yaml", broken)
	if err != nil {
		t.Fatal(err)
	}
	if findings.Errors() == 0 {
		t.Errorf("class without role passed the schema")
	}
	for _, f := range findings {
		t.Logf("%s", f)
	}
}
