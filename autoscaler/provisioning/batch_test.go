package provisioning

import (
	"testing"
)

// armed reports whether a round was asked for, and disarms the trigger.
func armed(p *Provisioner) bool {
	select {
	case <-p.trigger:
		return true
	default:
		return false
	}
}

func TestTriggerForExtendsWindowOncePerPod(t *testing.T) {
	p := New(nil, Options{})
	p.TriggerFor("a")
	if !armed(p) {
		t.Fatal("a new pending pod did not ask for a round")
	}
	p.TriggerFor("a")
	if armed(p) {
		t.Fatal("the same pod extended the batch window twice (a status rewrite by the kube-scheduler would keep every window open until BatchMax)")
	}
	p.TriggerFor("b")
	if !armed(p) {
		t.Fatal("another pod did not extend the window")
	}
	p.endWindow()
	p.TriggerFor("a")
	if !armed(p) {
		t.Fatal("a pod still pending after a round did not ask for the next one")
	}
}
