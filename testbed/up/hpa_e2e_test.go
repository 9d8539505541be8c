package up_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/api/scheme"
	"github.com/karpool/karpool/testbed/localenv/localenvtest"
)

// TestUpHPADemo runs seed 002 as a user would, by the seed's name: `karpool up --example
// seeds/002-hpa-terraform --demo` runs its local rendering and walks through it. The demo checks
// each step on the API objects (the HPA measuring the backend's CPU at low load on one
// t3.small; the load raised: the HPA at its maximum, t3.small nodes up to the pool's cpu limit,
// the pods beyond pending with the limit named; the load lowered: one replica, one node). Beside
// it, this test watches on its own that the HPA really scaled out and that the NodeClaims never
// exceeded the ten t3.small nodes the limit allows, and that nothing survives the run.
func TestUpHPADemo(t *testing.T) {
	requireTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 18*time.Minute)
	defer cancel()
	dir := t.TempDir()
	up := startUp(t, ctx, dir, "--example", "seeds/002-hpa-terraform", "--demo", "--interval", "5s")
	kubeconfig, _, _ := up.summary(t, ctx)
	go up.drain()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu                    sync.Mutex
		maxClaims, maxDesired int
	)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			var claims karpv1.NodeClaimList
			hpa := &autoscalingv2.HorizontalPodAutoscaler{}
			if c.List(ctx, &claims) == nil && c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "backend"}, hpa) == nil {
				mu.Lock()
				maxClaims, maxDesired = max(maxClaims, len(claims.Items)), max(maxDesired, int(hpa.Status.DesiredReplicas))
				mu.Unlock()
			}
			select {
			case <-up.exited:
				return
			case <-tick.C:
			}
		}
	}()
	if err := up.wait(16 * time.Minute); err != nil {
		t.Fatalf("karpool up --demo: %v\n%s", err, up.transcript.String())
	}
	<-watched
	for _, want := range []string{"running its local rendering, examples/hpa", "1 replica at", "on one t3.small",
		"40 replicas", "Running on 10 t3.small nodes, the pool's limit", `nodepool "default" limits exceeded`,
		"back to 1 replica", "demo passed: 3 steps"} {
		if !strings.Contains(up.transcript.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, up.transcript.String())
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if maxDesired != 40 || maxClaims != 10 {
		t.Errorf("watched: the HPA wanted at most %d replicas (want 40), at most %d NodeClaims existed (want 10, the limit)", maxDesired, maxClaims)
	}
	if s := localenvtest.Survivors([]int{up.cmd.Process.Pid}, dir); len(s) > 0 {
		t.Errorf("processes left behind: %v", s)
	}
}
