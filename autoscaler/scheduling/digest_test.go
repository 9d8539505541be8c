package scheduling_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	"github.com/karpool/karpool/autoscaler/scheduling"
	"github.com/karpool/karpool/autoscaler/scheduling/workload"
)

// TestPlanDigests guards refactors of the engine that must not change a single plan: it writes
// one line per input, "name sha256", of the canonical digest of the plan (NodeClaims with their
// pools, pods, instance types, offerings, zones, capacity types, requirements and labels;
// bindings in order; unschedulable pods with reasons) to $DIGEST_OUT, and, with $DIGEST_REF,
// fails on every input whose digest differs from the reference file's. The inputs are the random
// sweep's seeds DIGEST_FROM+1 to DIGEST_SEEDS and, with DIGEST_CALIB=1, the calibration and
// benchmark inputs (their cost bounds included, so the LP of package costbound is covered too).
//
//	DIGEST_SEEDS=10000 DIGEST_CALIB=1 DIGEST_OUT=/tmp/ref.txt go test -run TestPlanDigests ./autoscaler/scheduling
//	DIGEST_SEEDS=10000 DIGEST_CALIB=1 DIGEST_OUT=/tmp/new.txt DIGEST_REF=/tmp/ref.txt go test -run TestPlanDigests ./autoscaler/scheduling
func TestPlanDigests(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DIGEST_SEEDS"))
	calib := os.Getenv("DIGEST_CALIB") != ""
	if n == 0 && !calib {
		t.Skip("set DIGEST_SEEDS (and DIGEST_FROM, DIGEST_CALIB, DIGEST_OUT, DIGEST_REF)")
	}
	from, _ := strconv.Atoi(os.Getenv("DIGEST_FROM"))
	ref := readDigests(t, os.Getenv("DIGEST_REF"))
	var out *bufio.Writer
	if p := os.Getenv("DIGEST_OUT"); p != "" {
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		out = bufio.NewWriter(f)
		defer out.Flush()
	}
	differ := 0
	record := func(name, sum string) {
		if out != nil {
			fmt.Fprintf(out, "%s %s\n", name, sum)
		}
		if want, ok := ref[name]; ok && want != sum {
			differ++
			if differ <= 50 {
				t.Errorf("%s: plan digest %s, reference %s", name, sum, want)
			}
		}
	}
	for seed := int64(from) + 1; seed <= int64(n); seed++ {
		in := randomInput(seed)
		record(fmt.Sprintf("seed-%d", seed), planDigest(scheduling.Solve(in)))
	}
	if calib {
		for _, c := range digestCalibInputs(t) {
			h := sha256.New()
			writePlan(h, scheduling.Solve(c.in))
			b := lowerBound(t, c.in)
			fmt.Fprintf(h, "bound %v %v\n", b.LowerBound, b.Mix)
			fmt.Fprintf(h, "wholepods %v\n", wholePodBound(t, c.in))
			record(c.name, hex.EncodeToString(h.Sum(nil)))
		}
	}
	if differ > 0 {
		t.Errorf("%d plans differ from the reference", differ)
	}
}

type digestInput struct {
	name string
	in   *scheduling.Input
}

// digestCalibInputs are the inputs of TestCalibrateSeeds, TestCalibrateBoundVariants (the
// engine's part), TestCalibrateSmallDeployments and the benchmarks.
func digestCalibInputs(t *testing.T) []digestInput {
	var out []digestInput
	pools := calibPools()
	for seed := int64(1); seed <= 6; seed++ {
		for _, pl := range pools {
			out = append(out,
				digestInput{fmt.Sprintf("lognormal-%s-%d", pl.name, seed), lognormalInput(t, workload.Pods(workload.LognormalShapes(10000, seed)), pl.np())},
				digestInput{fmt.Sprintf("independent-%s-%d", pl.name, seed), lognormalInput(t, workload.Pods(workload.LognormalIndependentShapes(10000, seed, 0.9)), pl.np())})
		}
		for _, pl := range smallDeploymentsPools {
			for _, pods := range []int{2000, 10000} {
				out = append(out, digestInput{fmt.Sprintf("smalldeploys-%s-%d-%d", pl.name, pods, seed), lognormalInput(t, workload.Pods(workload.SmallDeploymentsShapes(pods, seed)), pl.np())})
			}
		}
	}
	noA1 := allNonBurstablePool()
	noA1.Spec.Template.Spec.Requirements = append(noA1.Spec.Template.Spec.Requirements, karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-family", Operator: corev1.NodeSelectorOpNotIn, Values: []string{"a1"}})
	nitro := allNonBurstablePool()
	nitro.Spec.Template.Spec.Requirements = append(nitro.Spec.Template.Spec.Requirements, karpv1.NodePoolRequirement{Key: "karpenter.k8s.aws/instance-generation", Operator: "Gt", Values: []string{"4"}})
	out = append(out,
		digestInput{"variant-noa1", lognormalInput(t, workload.Lognormal(10000), noA1)},
		digestInput{"variant-gen4", lognormalInput(t, workload.Lognormal(10000), nitro)},
		digestInput{"bench-mix1k", benchInput(workload.KarpenterMix(1000))},
		digestInput{"bench-mix5k", benchInput(workload.KarpenterMix(5000))},
		digestInput{"bench-mix20k", benchInput(workload.KarpenterMix(20000))},
		digestInput{"bench-pref4k", benchInput(workload.PreferencePods(4000))},
	)
	return out
}

func readDigests(t *testing.T, path string) map[string]string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if name, sum, ok := strings.Cut(l, " "); ok {
			out[name] = sum
		}
	}
	return out
}

func planDigest(res *scheduling.Result) string {
	h := sha256.New()
	writePlan(h, res)
	return hex.EncodeToString(h.Sum(nil))
}

// writePlan writes the plan canonically: every field of every NodeClaim, binding and
// unschedulable pod, in the result's order (the engine is deterministic, so order is part of
// the plan).
func writePlan(h hash.Hash, res *scheduling.Result) {
	podName := func(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }
	for i := range res.NodeClaims {
		nc := &res.NodeClaims[i]
		fmt.Fprintf(h, "claim %s pool %s\n", nc.Name, nc.Pool)
		for _, p := range nc.Pods {
			fmt.Fprintf(h, " pod %s\n", podName(p))
		}
		for _, o := range nc.InstanceTypes {
			fmt.Fprintf(h, " type %s %v", o.Type.Name, o.PricePerHour)
			for _, of := range o.Offerings {
				fmt.Fprintf(h, " %s/%s/%v/%v", of.Zone, of.CapacityType, of.PricePerHour, of.Available)
			}
			fmt.Fprintln(h)
		}
		fmt.Fprintf(h, " zones %v cts %v\n", nc.Zones, nc.CapacityTypes)
		for _, r := range nc.Requirements {
			mv := -1
			if r.MinValues != nil {
				mv = *r.MinValues
			}
			fmt.Fprintf(h, " req %s %s %v %d\n", r.Key, r.Operator, r.Values, mv)
		}
		keys := make([]string, 0, len(nc.Labels))
		for k := range nc.Labels {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(h, " label %s=%s\n", k, nc.Labels[k])
		}
		for _, tt := range append(slices.Clip(nc.Taints), nc.StartupTaints...) {
			fmt.Fprintf(h, " taint %s=%s:%s\n", tt.Key, tt.Value, tt.Effect)
		}
		fmt.Fprintf(h, " taints %d\n", len(nc.Taints))
		// Named and non-zero only, so a resource added to catalog.Resources changes no digest.
		fmt.Fprintf(h, " podreq %s dsreq %s\n", scheduling.FormatResources(nc.PodRequests), scheduling.FormatResources(nc.DaemonSetRequests))
	}
	for _, b := range res.Bindings {
		fmt.Fprintf(h, "bind %s %s %d\n", podName(b.Pod), b.Node, b.NodeClaim)
	}
	for _, u := range res.Unschedulable {
		fmt.Fprintf(h, "unsched %s %s\n", podName(u.Pod), u.Reason)
	}
}
