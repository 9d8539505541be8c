package manifests

// What a YAML document stands for once its aliases are followed, measured without following
// them: the check that stops a "billion laughs" document (a few hundred bytes whose nested
// aliases expand to gigabytes) before any reader expands it.

import yaml "go.yaml.in/yaml/v3"

// MaxAliasNodes is how many nodes aliases may add to one document: far more than honest anchors add
// (a NodePool template reused a few times), far less than a reader can hold.
const MaxAliasNodes = 100_000

// AliasesAdded counts the nodes the aliases of n add when they are followed, stopping once past max
// (a cycle counts as past max), and returns the alias where the count passes max (the one
// that expands to the most, the first in the document on a tie); worst is nil when n holds no
// alias. A document's own nodes are not counted, so a large document without aliases passes:
// its file's size bounds it. Each node is walked once.
func AliasesAdded(n *yaml.Node, max int) (added int, worst *yaml.Node) {
	own := countNodes(n, map[*yaml.Node]bool{})
	memo := map[*yaml.Node]int{}
	added = expandedNodes(n, memo, own+max) - own
	for a, c := range memo {
		if a.Kind != yaml.AliasNode {
			continue
		}
		if worst == nil || c > memo[worst] || c == memo[worst] && earlier(a, worst) {
			worst = a
		}
	}
	return added, worst
}

// countNodes counts the nodes of n as written, aliases as one node each.
func countNodes(n *yaml.Node, seen map[*yaml.Node]bool) int {
	if seen[n] {
		return 0
	}
	seen[n] = true
	c := 1
	for _, ch := range n.Content {
		c += countNodes(ch, seen)
	}
	return c
}

func expandedNodes(n *yaml.Node, memo map[*yaml.Node]int, max int) int {
	if c, ok := memo[n]; ok {
		return c
	}
	memo[n] = max + 1 // reached again while being counted: a cycle
	c := 1
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		c += expandedNodes(n.Alias, memo, max)
	}
	for _, ch := range n.Content {
		if c += expandedNodes(ch, memo, max); c > max {
			break
		}
	}
	memo[n] = c
	return c
}

func earlier(a, b *yaml.Node) bool {
	return a.Line < b.Line || a.Line == b.Line && a.Column < b.Column
}
