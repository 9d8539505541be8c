package vet

import (
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/karpool/karpool/internal/requirements"
	"github.com/karpool/karpool/manifests"
	"github.com/karpool/karpool/schema"
)

// facts is what the cross-document checks need of one document, taken while it is parsed (see
// inspect): locations for the findings they may report, and the findings that concern it alone.
type facts struct {
	errs  bool            // the schema found errors in it
	local schema.Findings // negative limits and the lints
	pool  *pool           // for a NodePool
	class bool            // an EC2NodeClass
}

// inspect takes the facts of a validated document.
func inspect(lim manifests.Limits) schema.Inspect {
	return func(d *manifests.Document, fs schema.Findings, checked bool) any {
		if !checked {
			return nil
		}
		f := &facts{class: d.Kind == "EC2NodeClass"}
		for _, x := range fs {
			if x.Severity == schema.Error {
				f.errs = true
			}
		}
		obj, err := d.Object(lim)
		if err != nil || f.errs {
			f.errs = true
			return f
		}
		switch d.Kind {
		case "EC2NodeClass":
			if x, ok := bootstrapLint(d, obj); ok {
				f.local = append(f.local, x)
			}
		case "NodePool":
			f.pool = newPool(d, obj)
			f.local = append(f.local, limitsCheck(d, obj)...)
			if x, ok := spotSingleTypeLint(d, obj, f.pool); ok {
				f.local = append(f.local, x)
			}

			if x, ok := neverWithBudgetsLint(d, obj); ok {
				f.local = append(f.local, x)
			}
		}
		return f
	}
}

// crossChecks are the checks a schema cannot make on one document: references between
// documents, duplicates, pools that compete for the same pods, negative limits, and the lints.
// Documents with schema errors take no part (their findings come first), except in the check
// for duplicate names.
func crossChecks(u *unit, opts Options) schema.Findings {
	var fs schema.Findings
	emit := func(d *doc, f schema.Finding) {
		if d.relocate != nil {
			f = d.relocate(f)
		}
		fs = append(fs, f)
	}
	type key struct{ group, kind, name string }
	first := map[key]*doc{}
	classes := map[string]bool{}
	var pools []*pool
	for _, d := range u.docs {
		if d.facts == nil {
			continue
		}
		k := key{d.Group(), d.Kind, d.Name}
		if prev, ok := first[k]; ok && d.Name != "" {
			if !d.facts.errs {
				at := prev.at([]string{"metadata", "name"})
				emit(d, schema.At(d.Document, []string{"metadata", "name"}, schema.Error, "duplicate",
					fmt.Sprintf("duplicate %s %q: also defined at %s", d.Kind, d.Name, at.Location()),
					"rename one of them; the one applied last would silently replace the other"))
			}
		} else if d.Name != "" {
			first[k] = d
		}
		if d.facts.class {
			// An invalid class is still there: its own errors say what to fix, and a pool
			// naming it is not told the class is missing.
			classes[d.Name] = true
		}
		if d.facts.errs {
			continue
		}
		for _, f := range d.facts.local {
			emit(d, f)
		}
		if p := d.facts.pool; p != nil {
			p.doc = d
			pools = append(pools, p)
		}
	}

	// nodeClassRef: every pool's class must be in the set.
	var names []string
	for n := range classes {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, p := range pools {
		if opts.AllowExternalRefs {
			break
		}
		ref := p.ref
		path := []string{"spec", "template", "spec", "nodeClassRef"}
		switch {
		case ref.group != "karpenter.k8s.aws" || ref.kind != "EC2NodeClass":
			emit(p.doc, schema.At(p.doc.Document, append(path, "kind"), schema.Error, "nodeclassref",
				fmt.Sprintf("nodeClassRef names a %s of group %s; karpool pools use EC2NodeClasses (group karpenter.k8s.aws)", ref.kind, ref.group),
				"point it at an EC2NodeClass, or pass --allow-external-refs if that node class is managed elsewhere"))
		case !classes[ref.name]:
			hint := "add an EC2NodeClass named " + strconv.Quote(ref.name) + " to the files vetted, or pass --allow-external-refs if it is applied from elsewhere"
			if len(names) > 0 {
				hint = fmt.Sprintf("the EC2NodeClasses here are %s; %s", quoteJoin(names), hint)
			}
			emit(p.doc, schema.At(p.doc.Document, append(path, "name"), schema.Error, "nodeclassref",
				fmt.Sprintf("nodeClassRef names EC2NodeClass %q, which is not among the documents vetted", ref.name), hint))
		}
	}

	// Pools of equal weight whose requirements overlap compete for the same pods. Each pool is
	// reported once, with the first earlier pool it overlaps. Candidates come from an index of
	// the values pools require with In (pools that require different values of a label cannot
	// overlap), and the comparisons are capped, so that thousands of pools stay fast.
	byWeight := map[int]*overlapIndex{}
	budget := maxOverlapComparisons
	for _, b := range pools {
		idx := byWeight[b.weight]
		if idx == nil {
			idx = &overlapIndex{byValue: map[string]map[string][]*pool{}, without: map[string][]*pool{}}
			byWeight[b.weight] = idx
		}
		for _, a := range idx.candidates(b) {
			if budget--; budget < 0 {
				break
			}
			if !a.constraints().overlaps(b.constraints()) {
				continue
			}
			w := "unset"
			if a.weight != 0 {
				w = strconv.Itoa(a.weight)
			}
			at := a.doc.at([]string{"metadata", "name"})
			emit(b.doc, schema.At(b.doc.Document, []string{"spec", "template", "spec", "requirements"}, schema.Warning, "overlapping-pools",
				fmt.Sprintf("NodePools %q and %q have the same weight (%s) and overlapping requirements (%s at %s): which one Karpenter launches for a pod both fit is not defined", b.doc.Name, a.doc.Name, w, a.doc.Name, at.Location()),
				"give the preferred pool a higher spec.weight, or make the requirements exclusive (for example on karpenter.sh/capacity-type)"))
			break
		}
		idx.add(b)
		b.built = nil // rebuilt when compared again; keeps thousands of pools small
	}
	return fs
}

// overlapIndex finds the pools (of one weight) that may overlap a pool: those that require, for
// the label on which the pool is most selective, one of the values it requires, or do not
// require that label to be In a set at all.
type overlapIndex struct {
	pools   []*pool
	byValue map[string]map[string][]*pool // key -> value -> pools requiring it with In
	without map[string][]*pool            // key -> pools with no In on key
	keys    map[string]bool               // every key some pool requires with In
}

func (x *overlapIndex) add(p *pool) {
	in := p.constraints()
	for k, c := range in {
		if c.In() == nil {
			continue
		}
		if x.byValue[k] == nil {
			x.byValue[k] = map[string][]*pool{}
		}
		for _, v := range c.In() {
			x.byValue[k][v] = append(x.byValue[k][v], p)
		}
	}
	if x.keys == nil {
		x.keys = map[string]bool{}
	}
	for k := range x.keys {
		if c := in[k]; c == nil || c.In() == nil {
			x.without[k] = append(x.without[k], p)
		}
	}
	for k, c := range in {
		if c.In() != nil && !x.keys[k] {
			// A key seen for the first time: every pool before p lacks it.
			x.keys[k] = true
			x.without[k] = append([]*pool(nil), x.pools...)
		}
	}
	x.pools = append(x.pools, p)
}

func (x *overlapIndex) candidates(p *pool) []*pool {
	// The label that leaves the fewest candidates.
	best, bestN := "", -1
	for k, c := range p.constraints() {
		if c.In() == nil || !x.keys[k] {
			continue
		}
		n := len(x.without[k])
		for _, v := range c.In() {
			n += len(x.byValue[k][v])
		}
		if bestN < 0 || n < bestN {
			best, bestN = k, n
		}
	}
	if bestN < 0 {
		return x.pools
	}
	seen := map[*pool]bool{}
	var out []*pool
	for _, v := range p.constraints()[best].In() {
		for _, a := range x.byValue[best][v] {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	out = append(out, x.without[best]...)
	return out
}

// maxOverlapComparisons bounds the pairs of pools compared for overlaps in one unit.
const maxOverlapComparisons = 1_000_000

func quoteJoin(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

// get returns the value at path in obj.
func get(obj any, path ...string) (any, bool) {
	for _, p := range path {
		m, ok := obj.(map[string]any)
		if !ok {
			return nil, false
		}
		if obj, ok = m[p]; !ok {
			return nil, false
		}
	}
	return obj, true
}

func getString(obj any, path ...string) string {
	v, _ := get(obj, path...)
	s, _ := v.(string)
	return s
}

// limitsCheck: a negative limit would stop the pool from ever launching a node. The API server
// accepts it (a quantity may be negative), so the schema does too.
func limitsCheck(d *manifests.Document, obj any) schema.Findings {
	v, ok := get(obj, "spec", "limits")
	if !ok {
		return nil
	}
	m, _ := v.(map[string]any)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var fs schema.Findings
	for _, k := range keys {
		neg := false
		switch x := m[k].(type) {
		case int64:
			neg = x < 0
		case *big.Int:
			neg = x.Sign() < 0
		case string:
			if q, err := resource.ParseQuantity(x); err == nil {
				neg = q.Sign() < 0
			}
		}
		if neg {
			fs = append(fs, schema.At(d, []string{"spec", "limits", k}, schema.Error, "limits",
				fmt.Sprintf("limit on %s is negative: the pool could never launch a node", k),
				"use 0 to stop the pool launching nodes, or a positive limit"))
		}
	}
	return fs
}

// bootstrapLint: /etc/eks/bootstrap.sh is the Amazon Linux 2 way to join a cluster; AL2023 AMIs
// do not have it (they use nodeadm and a NodeConfig).
func bootstrapLint(d *manifests.Document, obj any) (schema.Finding, bool) {
	ud := getString(obj, "spec", "userData")
	if !strings.Contains(ud, "/etc/eks/bootstrap.sh") {
		return schema.Finding{}, false
	}
	al2023 := getString(obj, "spec", "amiFamily") == "AL2023"
	if terms, ok := get(obj, "spec", "amiSelectorTerms"); ok {
		for _, t := range asList(terms) {
			if strings.HasPrefix(getString(t, "alias"), "al2023@") {
				al2023 = true
			}
		}
	}
	if !al2023 {
		return schema.Finding{}, false
	}
	return schema.At(d, []string{"spec", "userData"}, schema.Warning, "al2023-bootstrap",
		"userData runs /etc/eks/bootstrap.sh, which AL2023 AMIs do not have: they join the cluster with nodeadm, and the script would fail",
		"on AL2023 put settings in a nodeadm NodeConfig (MIME multi-part userData), or use an AL2 AMI (alias al2@latest)"), true
}

// spotSingleTypeLint: a spot-only pool that allows one instance type draws from one spot capacity
// pool per zone, which is often short and is interrupted all at once.
func spotSingleTypeLint(d *manifests.Document, obj any, p *pool) (schema.Finding, bool) {
	ct := p.constraints()["karpenter.sh/capacity-type"]
	it := p.constraints()["node.kubernetes.io/instance-type"]
	if ct == nil || !single(ct, "spot") || it == nil || !single(it, "") {
		return schema.Finding{}, false
	}
	types, _ := it.Finite()
	path := []string{"spec", "template", "spec", "requirements"}
	if i := requirementIndex(obj, "node.kubernetes.io/instance-type"); i >= 0 {
		path = append(path, strconv.Itoa(i), "values")
	}
	return schema.At(d, path, schema.Warning, "spot-single-type",
		fmt.Sprintf("spot-only pool with a single instance type (%s): its spot capacity is often short and is interrupted all at once", types[0]),
		"allow several instance types or families of the same size (for example with karpenter.k8s.aws/instance-category and instance-cpu), or on-demand as a fallback"), true
}

// neverWithBudgetsLint: with consolidateAfter Never nothing is consolidated, so budgets only
// matter for drift and expiration; budgets written for consolidation are a sign of a mix-up.
func neverWithBudgetsLint(d *manifests.Document, obj any) (schema.Finding, bool) {
	if getString(obj, "spec", "disruption", "consolidateAfter") != "Never" {
		return schema.Finding{}, false
	}
	if _, ok := get(obj, "spec", "disruption", "budgets"); !ok {
		return schema.Finding{}, false
	}
	return schema.At(d, []string{"spec", "disruption", "consolidateAfter"}, schema.Warning, "never-with-budgets",
		"consolidateAfter is Never, so the pool is never consolidated, yet it sets disruption budgets: they only limit drift and expiration here",
		"drop the budgets, or set consolidateAfter to a duration (e.g. 5m) if consolidation was meant"), true
}

// requirementIndex returns the index of the (last) requirement on key, or -1.
func requirementIndex(obj any, key string) int {
	reqs, _ := get(obj, "spec", "template", "spec", "requirements")
	idx := -1
	for i, r := range asList(reqs) {
		if getString(r, "key") == key {
			idx = i
		}
	}
	return idx
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

// pool is what the cross-document checks need of a NodePool, kept small: a run may hold
// thousands.
type pool struct {
	doc    *doc
	weight int
	ref    struct{ group, kind, name string }
	reqs   []rawRequirement
	built  poolRequirements
}

type rawRequirement struct {
	key, op string
	values  []string
}

// constraints returns the pool's requirements as constraints per key, built on first use.
func (p *pool) constraints() poolRequirements {
	if p.built == nil {
		p.built = poolRequirements{}
		for _, r := range p.reqs {
			p.built.add(r.key, r.op, r.values)
		}
	}
	return p.built
}

func newPool(d *manifests.Document, obj any) *pool {
	p := &pool{}
	if w, ok := get(obj, "spec", "weight"); ok {
		if i, ok := w.(int64); ok {
			p.weight = int(i)
		}
	}
	p.ref.group = getString(obj, "spec", "template", "spec", "nodeClassRef", "group")
	p.ref.kind = getString(obj, "spec", "template", "spec", "nodeClassRef", "kind")
	p.ref.name = getString(obj, "spec", "template", "spec", "nodeClassRef", "name")
	reqs, _ := get(obj, "spec", "template", "spec", "requirements")
	for _, r := range asList(reqs) {
		key := getString(r, "key")
		var values []string
		if vs, ok := get(r, "values"); ok {
			for _, v := range asList(vs) {
				if s, ok := v.(string); ok {
					values = append(values, s)
				}
			}
		}
		p.reqs = append(p.reqs, rawRequirement{key, getString(r, "operator"), values})
	}
	return p
}

// single reports whether an In requirement leaves exactly one value (want, unless empty).
func single(v *requirements.Values, want string) bool {
	vals, ok := v.Finite()
	return ok && len(vals) == 1 && (want == "" || vals[0] == want)
}

// poolRequirements is a pool's requirements, per label key, as the set of values a node may
// carry.
type poolRequirements map[string]*requirements.Values

func (rs poolRequirements) add(key, op string, values []string) {
	r := requirements.New(key, corev1.NodeSelectorOperator(op), values)
	if v := rs[r.Key]; v != nil {
		v.Add(r)
		return
	}
	rs[r.Key] = requirements.Of(r)
}

// overlaps reports whether some node could meet both pools' requirements.
func (rs poolRequirements) overlaps(o poolRequirements) bool {
	for k, v := range rs {
		both := v.Clone()
		if ov := o[k]; ov != nil {
			both.Intersect(ov)
		}
		if !both.Satisfiable() {
			return false
		}
	}
	for k, v := range o {
		if _, ok := rs[k]; !ok && !v.Satisfiable() {
			return false
		}
	}
	return true
}
