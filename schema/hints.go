package schema

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"cuelang.org/go/cue"
	"go.yaml.in/yaml/v3"

	"github.com/karpool/karpool/internal/suggest"
	"github.com/karpool/karpool/manifests"
)

// Some rules are reported by the schema on the struct holding the field they are about: rules on
// a whole list (a CUE comprehension may not put an error on the field it reads), and rules on
// one field of a list element or reference (one message per field, rather than one per rule
// broken). fieldOf names that field, so that the finding points at it. parent is the last path
// element the error arrives on ("[]" for a list element).
var fieldOf = []struct{ message, parent, field string }{
	{"other amiSelectorTerms", "spec", "amiSelectorTerms"},
	{"subnetSelectorTerms cannot be empty", "spec", "subnetSelectorTerms"},
	{"in a subnet selector term", "spec", "subnetSelectorTerms"},
	{"securityGroupSelectorTerms cannot be empty", "spec", "securityGroupSelectorTerms"},
	{"in a security group selector term", "spec", "securityGroupSelectorTerms"},
	{"in a capacity reservation selector term", "spec", "capacityReservationSelectorTerms"},
	{"blockDeviceMappings with rootVolume", "spec", "blockDeviceMappings"},
	{"networkInterfaces must", "spec", "networkInterfaces"},
	{"role must be an IAM role", "spec", "role"},
	{"kubeReserved value cannot", "kubelet", "kubeReserved"},
	{"systemReserved value cannot", "kubelet", "systemReserved"},
	{"group may not be empty", "nodeClassRef", "group"},
	{"group must be an API group", "nodeClassRef", "group"},
	{"kind may not be empty", "nodeClassRef", "kind"},
	{"name may not be empty", "nodeClassRef", "name"},
	{`label domain "karpenter.sh" is restricted`, "[]", "key"},
	{`label "karpenter.sh/nodepool" is restricted`, "[]", "key"},
	{`label "kubernetes.io/hostname" is restricted`, "[]", "key"},
	{`label domain "karpenter.k8s.aws" is restricted`, "[]", "key"},
	{"'alias' must be at most", "[]", "alias"},
	{"'alias' is improperly formatted", "[]", "alias"},
	{"family is not supported", "[]", "alias"},
	{"windows families may only", "[]", "alias"},
}

var (
	maxItemsRE  = regexp.MustCompile(`does not satisfy list\.MaxItems\((\d+)\)`)
	minItemsRE  = regexp.MustCompile(`does not satisfy list\.MinItems\((\d+)\)`)
	maxFieldsRE = regexp.MustCompile(`does not satisfy struct\.MaxFields\((\d+)\)`)
	mismatchRE  = regexp.MustCompile(`^conflicting values .* \(mismatched types (\w+) and (\w+)\)$`)
	boundRE     = regexp.MustCompile(`^invalid value .* \((out of bound|does not satisfy) (.*)\)$`)
	conflictRE  = regexp.MustCompile(`^conflicting values (.+) and (.+)$`)
	enumRE      = regexp.MustCompile(`^\^\(([A-Za-z0-9_|-]+)\)\$$`)
	numBoundRE  = regexp.MustCompile(`^(>=|<=|>|<)(-?[0-9.]+)$`)
	runesRE     = regexp.MustCompile(`^strings\.(Min|Max)Runes\((\d+)\)$`)
)

// summarize turns what CUE reports about one field that failed without a message of the schema's
// own (the alternatives of a disjunction, a pattern, a bound) into one message for explain.
func summarize(msgs []string) string {
	for _, m := range msgs {
		if boundRE.MatchString(m) {
			return m
		}
	}
	var alts []string
	for _, m := range msgs {
		if c := conflictRE.FindStringSubmatch(m); c != nil && !strings.Contains(m, "mismatched types") {
			alts = append(alts, c[1])
		}
	}
	if len(alts) > 0 {
		return "supported values: " + strings.Join(alts, ", ")
	}
	for _, m := range msgs {
		if mismatchRE.MatchString(m) {
			return m
		}
	}
	for _, m := range msgs {
		if !strings.Contains(m, "errors in empty disjunction") {
			return m
		}
	}
	return msgs[0]
}

// enumOrder lists the values of the enums that have a default (and so are disjunctions in the
// schema), in the CRDs' order.
var enumOrder = map[string][]string{
	"consolidationPolicy": {"WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced"},
	"httpEndpoint":        {"enabled", "disabled"},
	"httpProtocolIPv6":    {"enabled", "disabled"},
	"httpTokens":          {"required", "optional"},
	"mode":                {"off", "plan", "apply"},
}

func quoteAll(vs []string) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = strconv.Quote(v)
	}
	return strings.Join(q, ", ")
}

// explainBound words a failed pattern, bound or string-length constraint.
func explainBound(kind, c string) string {
	if kind == "out of bound" {
		if re, ok := strings.CutPrefix(c, "=~"); ok {
			if u, err := strconv.Unquote(re); err == nil {
				re = u
			}
			if m := enumRE.FindStringSubmatch(re); m != nil {
				return "supported values: " + quoteAll(strings.Split(m[1], "|"))
			}
			if d, ok := patterns[re]; ok {
				return d
			}
			return "must match the pattern " + re
		}
		if m := numBoundRE.FindStringSubmatch(c); m != nil {
			word := map[string]string{">=": "greater than or equal to", "<=": "less than or equal to", ">": "greater than", "<": "less than"}[m[1]]
			if m[2] == "2147483647" || m[2] == "-2147483648" {
				return "must fit in a 32-bit integer"
			}
			return "must be " + word + " " + m[2]
		}
		return "must satisfy " + c
	}
	if m := runesRE.FindStringSubmatch(c); m != nil {
		if m[1] == "Min" {
			if m[2] == "1" {
				return "must not be empty"
			}
			return "must be at least " + m[2] + " characters"
		}
		return "must be at most " + m[2] + " characters"
	}
	if m := maxItemsRE.FindStringSubmatch("does not satisfy " + c); m != nil {
		return "must have at most " + m[1] + " items"
	}
	if m := minItemsRE.FindStringSubmatch("does not satisfy " + c); m != nil {
		return "must have at least " + m[1] + " item(s)"
	}
	if m := maxFieldsRE.FindStringSubmatch("does not satisfy " + c); m != nil {
		return "must have at most " + m[1] + " items"
	}
	if strings.HasPrefix(c, "list.UniqueItems") {
		return "must not contain duplicates"
	}
	return "must satisfy " + c
}

func boundHint(kind, c string) string {
	re, ok := strings.CutPrefix(c, "=~")
	if !ok {
		if strings.HasPrefix(c, "list.MaxItems") || strings.HasPrefix(c, "struct.MaxFields") {
			return "remove some items"
		}
		if strings.HasPrefix(c, "list.UniqueItems") {
			return "remove the repeated items"
		}
		return ""
	}
	if u, err := strconv.Unquote(re); err == nil {
		re = u
	}
	if enumRE.MatchString(re) {
		return "use one of the supported values (they are case-sensitive)"
	}
	return patternHints[re]
}

// siblingString returns the string value of field name in the struct at path, if any.
func siblingString(d *manifests.Document, path []string, name string) string {
	n, matched := d.Lookup(append(path[:len(path):len(path)], name))
	if matched != len(path)+1 {
		return ""
	}
	if n.Node.Kind == yaml.ScalarNode {
		return n.Node.Value
	}
	return ""
}

// patterns words the schema's patterns (as CUE prints them, unquoted).
var patterns = map[string]string{
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`:                                                 "must be a lowercase DNS subdomain (a-z, 0-9, '-' and '.'), like \"default\" or \"gpu-spot\"",
	`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(\/))?([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`:  "must be a qualified name such as example.com/dedicated: an optional DNS prefix and '/', then letters, digits, '-', '_' and '.'",
	`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`:                                                                "must be a label value: at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
	`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`: "must be a resource quantity such as 500m, 2, 1.5 or 16Gi",
	`^([0-9]+(s|m|h))+$`:           "must be a duration such as 30s, 5m or 1h30m",
	`^(([0-9]+(s|m|h))+|Never)$`:   "must be a duration such as 30s, 5m or 720h, or Never",
	`^((100|[0-9]{1,2})%|[0-9]+)$`: "must be a node count or a percentage from 0% to 100%, like \"5\" or \"10%\"",
	`^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$`: "must be a cron schedule of five fields, like \"0 9 * * mon-fri\", or a macro such as @daily",
	`^((([0-9]+(h|m))|([0-9]+h[0-9]+m))(0s)?)$`:                                                  "must be hours and/or minutes, like 8h, 30m or 1h30m",
	`^[^/]*$`:          "must be an API group without a version, like karpenter.k8s.aws",
	`ami-[0-9a-z]+`:    "must be an AMI ID like ami-0123456789abcdef0",
	`subnet-[0-9a-z]+`: "must be a subnet ID like subnet-0123456789abcdef0",
	`sg-[0-9a-z]+`:     "must be a security group ID like sg-0123456789abcdef0",
	`^cr-[0-9a-z]+$`:   "must be a capacity reservation ID like cr-0123456789abcdef0",
	`^[0-9]{12}$`:      "must be a 12-digit AWS account ID",
	`^pg-[0-9a-z]+$`:   "must be a placement group ID like pg-0123456789abcdef0",
	`^((?:[1-9][0-9]{0,3}|[1-4][0-9]{4}|[5][0-8][0-9]{3}|59000)Gi|(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|[6][0-3][0-9]{3}|64000)G|([1-9]||[1-5][0-7]|58)Ti|([1-9]||[1-5][0-9]|6[0-3]|64)T)$`: "must be a size from 1Gi to 59000Gi (or 1G to 64000G, 1Ti to 58Ti, 1T to 64T), like 20Gi",
	`^((\d{1,2}(\.\d{1,2})?|100(\.0{1,2})?)%||(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?)$`:                       "must be a percentage like 10% or a quantity like 500Mi",
	`^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$`:                                           "must be a duration such as 500ms, 30s, 5m or 1h",
	`^(([+-]{1}(\d*\.?\d+))|(\+{1}\d*\.?\d+%)|(^(-\d{1,2}(\.\d+)?%)$)|(-100%))$`: "must be a signed amount of dollars per hour such as -0.05 or +1.2, or a percentage such as +10% or -15% (at most -100%)",
	`^\d+(\.\d+)?$`:                       "must be a price in dollars per hour such as 0.25",
	`^\$?[0-9]{1,9}(\.[0-9]{1,6})?(/h)?$`: "must be USD per hour such as 25, 25.50 or $25.50/h (at most 6 decimals)",
	`^(https?|ssh|file)://.+$`:            "must be an https://, http://, ssh:// or file:// URL",
	`^[a-z]{2}(-[a-z]+)+-[0-9]+$`:         "must be an AWS region such as us-east-1",
	`^[0-9a-f]{40}$`:                      "must be a full 40-character lowercase SHA-1",
	`^((arn:(aws|aws-cn|aws-us-gov):iam::([0-9]{12}):role/)|/)?(([A-Za-z0-9+=,.@_-]+/)*)([A-Za-z0-9+=,.@_-]{1,64})$`: "must be an IAM role name (1 to 64 letters, digits and + = , . @ _ -), optionally after its path (team/NodeRole), or the role's ARN",
	`^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`:                                                              "must be an SQS queue name: 1 to 80 letters, digits, - and _, a FIFO queue's ending in .fifo",
}

var patternHints = map[string]string{
	`^(([0-9]+(s|m|h))+|Never)$`: "durations use s, m and h: 720h for 30 days; Never turns it off",
	`^([0-9]+(s|m|h))+$`:         "durations use s, m and h, e.g. 90s, 5m, 1h30m",
	`^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$`: "e.g. 500m or 2 for cpu, 512Mi or 16Gi for memory",
	`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`:                                                                "e.g. team-a; no spaces or slashes",
	`^((100|[0-9]{1,2})%|[0-9]+)$`: `e.g. nodes: "10%" or nodes: "2"`,
	`^((arn:(aws|aws-cn|aws-us-gov):iam::([0-9]{12}):role/)|/)?(([A-Za-z0-9+=,.@_-]+/)*)([A-Za-z0-9+=,.@_-]{1,64})$`: "e.g. KarpenterNodeRole-CLUSTER, team/KarpenterNodeRole-CLUSTER or arn:aws:iam::ACCOUNT:role/NAME; no * ? or ${",
	`^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`:                                                              "e.g. the cluster name; no * ? or ${",
}

// explain turns a CUE error message into the message and fix hint a user reads. It may extend
// path (for errors reported on a parent), which is why it takes a pointer.
func explain(s *Schema, d *manifests.Document, path *[]string, present bool, msg string, x *yaml.Node) (string, string) {
	last := ""
	if n := len(*path); n > 0 {
		last = (*path)[n-1]
	}
	for _, fo := range fieldOf {
		if strings.Contains(msg, fo.message) && (last == fo.parent || fo.parent == "[]" && isIndex(last)) {
			*path = append(*path, fo.field)
			break
		}
	}
	if m := boundRE.FindStringSubmatch(msg); m != nil {
		return explainBound(m[1], m[2]), boundHint(m[1], m[2])
	}
	switch {
	case msg == "field is required but not present":
		if last == "values" {
			// A requirement's values, required by one of the CRD's rules on requirements.
			if op := siblingString(d, (*path)[:len(*path)-1], "operator"); op == "In" || op == "NotIn" {
				return fmt.Sprintf("requirements with operator '%s' must have a value defined", op), "list at least one value, or use operator Exists"
			} else if op != "" {
				return "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value", `give exactly one whole number as a string, e.g. values: ["2"]`
			}
		}
		if last == "schedule" || last == "duration" {
			return "'schedule' must be set with 'duration'", "give the budget both schedule (cron) and duration (e.g. 8h), or neither"
		}
		return "required field is missing", requiredHint(*path)
	case msg == "field not allowed":
		return fmt.Sprintf("unknown field %q", last), unknownFieldHint(s, d, *path)
	}
	if strings.HasPrefix(msg, "supported values: ") {
		if vs, ok := enumOrder[last]; ok {
			msg = "supported values: " + quoteAll(vs)
		}
		return msg, "use one of the supported values (they are case-sensitive)"
	}
	if m := mismatchRE.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("must be %s, not %s", typeName(m[2]), typeName(m[1])), typeHint(m[2])
	}
	for _, h := range ruleHints {
		if strings.Contains(msg, h.message) {
			return msg, h.hint
		}
	}
	return msg, ""
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func typeName(t string) string {
	switch t {
	case "int":
		return "an integer"
	case "float", "number":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "struct":
		return "a mapping"
	case "list":
		return "a list"
	case "null":
		return "null"
	}
	return t
}

func typeHint(want string) string {
	switch want {
	case "string":
		return "quote the value, e.g. \"5m\" or \"100\""
	case "int":
		return "write a whole number without quotes"
	case "list":
		return "write a YAML list: one item per line starting with \"- \""
	case "struct":
		return "write a YAML mapping of keys to values"
	}
	return ""
}

// requiredHint suggests what to add for a missing field.
func requiredHint(path []string) string {
	if len(path) == 0 {
		return ""
	}
	field := path[len(path)-1]
	if ex, ok := requiredExamples[field]; ok {
		return "add " + ex
	}
	return "add " + field
}

var requiredExamples = map[string]string{
	"apiVersion":                 "apiVersion (karpenter.sh/v1 for NodePools, karpenter.k8s.aws/v1 for EC2NodeClasses)",
	"metadata":                   "metadata: {name: default}",
	"name":                       "name, e.g. name: default",
	"spec":                       "spec",
	"template":                   "template: {spec: {nodeClassRef: {...}, requirements: [...]}}",
	"nodeClassRef":               "nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}",
	"requirements":               "requirements (a list; [] allows any node Karpenter can launch)",
	"consolidateAfter":           "consolidateAfter: 0s (or 5m, or Never)",
	"key":                        "key, the label the requirement or taint is about",
	"operator":                   "operator: In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte",
	"effect":                     "effect: NoSchedule, PreferNoSchedule or NoExecute",
	"group":                      "group: karpenter.k8s.aws",
	"kind":                       "kind",
	"amiSelectorTerms":           "amiSelectorTerms: [{alias: al2023@latest}]",
	"subnetSelectorTerms":        "subnetSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]",
	"securityGroupSelectorTerms": "securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: CLUSTER}}]",
	"interfaceType":              "interfaceType: interface (or efa-only)",
	"networkCardIndex":           "networkCardIndex: 0",
	"deviceIndex":                "deviceIndex: 0",
	"url":                        "url: https://github.com/ORG/REPO.git",
	"interval":                   "interval: 5m",
	"region":                     "region, e.g. us-east-1",
	"clusterName":                "clusterName, the EKS cluster name",
	"provider":                   "provider: github or gitea",
	"secretRef":                  "secretRef: {name: SECRET}",
}

// unknownFieldHint lists the fields allowed where an unknown one was found, with the closest
// one first when the unknown field looks like a misspelling.
func unknownFieldHint(s *Schema, d *manifests.Document, path []string) string {
	if len(path) == 0 {
		return ""
	}
	bad := path[len(path)-1]
	if moved, ok := movedFields[bad]; ok {
		return moved
	}
	def, ok := s.defs[d.APIVersion+"|"+d.Kind]
	if !ok {
		return "remove it"
	}
	names := fieldNames(def, path[:len(path)-1])
	if len(names) == 0 {
		return "remove it"
	}
	if best := suggest.Closest(bad, names); best != "" {
		return fmt.Sprintf("did you mean %q?", best)
	}
	if len(names) > 12 {
		return "remove it, or check the spelling against the Karpenter v1 API reference"
	}
	return "remove it; allowed here: " + strings.Join(names, ", ")
}

// movedFields are fields of older Karpenter APIs that users still write.
var movedFields = map[string]string{
	"kubelet":               "kubelet settings moved from the NodePool to the EC2NodeClass (spec.kubelet) in Karpenter v1",
	"expireAfter":           "in Karpenter v1 expireAfter is set in spec.template.spec.expireAfter",
	"amiSelector":           "v1 uses amiSelectorTerms: run `karpool migrate` on the file",
	"subnetSelector":        "v1 uses subnetSelectorTerms: run `karpool migrate` on the file",
	"securityGroupSelector": "v1 uses securityGroupSelectorTerms: run `karpool migrate` on the file",
	"providerRef":           "v1 uses spec.template.spec.nodeClassRef: run `karpool migrate` on the file",
	"ttlSecondsAfterEmpty":  "v1 uses disruption.consolidationPolicy WhenEmpty and consolidateAfter: run `karpool migrate` on the file",
	"consolidation":         "v1 uses disruption.consolidationPolicy: run `karpool migrate` on the file",
}

// fieldNames lists the fields the definition allows at path (a path into a document).
func fieldNames(v cue.Value, path []string) []string {
	for _, p := range path {
		if isIndex(p) {
			v = v.LookupPath(cue.MakePath(cue.AnyIndex))
			continue
		}
		next, found := cue.Value{}, false
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			return nil
		}
		for it.Next() {
			if it.Selector().Unquoted() == p {
				next, found = it.Value(), true
				break
			}
		}
		if !found {
			return nil
		}
		v = next
	}
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	var names []string
	for it.Next() {
		sel := it.Selector()
		if sel.IsDefinition() || sel.PkgPath() != "" {
			continue
		}
		names = append(names, sel.Unquoted())
	}
	slices.Sort(names)
	return names
}

// ruleHints are the fixes for the CRDs' CEL rules and the schema's own messages, by a part of
// the message.
var ruleHints = []struct{ message, hint string }{
	{"must specify exactly one of ['role', 'instanceProfile']", "keep role (an IAM role; Karpenter makes the instance profile) or instanceProfile (an existing profile), not both"},
	{"role cannot be empty", "set role to the node IAM role name, e.g. KarpenterNodeRole-CLUSTER"},
	{"role must be an IAM role", "write the role's name (1 to 64 letters, digits and + = , . @ _ -), e.g. KarpenterNodeRole-CLUSTER, optionally after its path (team/KarpenterNodeRole-CLUSTER), or its ARN (arn:aws:iam::ACCOUNT:role/NAME); no * ? or ${"},
	{"instanceProfile cannot be empty", "set instanceProfile to an existing instance profile name, or use role instead"},
	{"'schedule' must be set with 'duration'", "give the budget both schedule (cron) and duration (e.g. 8h), or neither"},
	{`label domain "karpenter.sh" is restricted`, "Karpenter owns karpenter.sh labels (only capacity-type may be used); use your own domain, e.g. example.com/team"},
	{`label "karpenter.sh/nodepool" is restricted`, "Karpenter sets karpenter.sh/nodepool on every node itself; remove it"},
	{`label "kubernetes.io/hostname" is restricted`, "the kubelet sets the hostname label; spread pods with topology constraints instead"},
	{`label domain "karpenter.k8s.aws" is restricted`, "use a well-known label (karpenter.k8s.aws/instance-family, instance-category, instance-cpu, ...) or your own domain"},
	{"group may not be empty", "set group: karpenter.k8s.aws"},
	{"kind may not be empty", "set kind: EC2NodeClass"},
	{"name may not be empty", "set name to the metadata.name of an EC2NodeClass"},
	{"must be an API group without a version", "write group: karpenter.k8s.aws (the version is implied)"},
	{"requirements with operator 'In' must have a value defined", "list at least one value, or use operator Exists"},
	{"must have a single positive integer value", `give exactly one whole number as a string, e.g. values: ["2"]`},
	{"must have at least that many values specified", "lower minValues or list more values"},
	{"only 'limits.nodes' is supported on static NodePools", "static pools (replicas set) may only limit nodes: limits: {nodes: N}; or drop replicas"},
	{"'weight' is not supported on static NodePools", "drop weight, or drop replicas to make the pool dynamic"},
	{"when using an AL2023 alias", "drop amiFamily (the alias implies it) or set amiFamily: AL2023"},
	{"when using an AL2 alias", "drop amiFamily (the alias implies it) or set amiFamily: AL2"},
	{"when using a Bottlerocket alias", "drop amiFamily (the alias implies it) or set amiFamily: Bottlerocket"},
	{"when using a Windows", "drop amiFamily (the alias implies it) or set it to the alias's Windows family"},
	{"must specify amiFamily if amiSelectorTerms does not contain an alias", "add amiFamily (AL2023, AL2, Bottlerocket, Windows2022, ...) or select the AMI by alias, e.g. al2023@latest"},
	{"expected at least one, got none", "give the term at least one of the fields the message lists"},
	{"'id' is mutually exclusive", "a term selecting by id takes no other fields: split it into separate terms"},
	{"'alias' is mutually exclusive, cannot be set with a combination of other fields", "an alias term stands alone: remove the other fields"},
	{"'alias' is mutually exclusive, cannot be set with a combination of other amiSelectorTerms", "keep the alias term alone, or select AMIs by id, name or tags instead"},
	{"'name' is mutually exclusive", "a term selecting by name takes no other fields: split it into separate terms"},
	{"'alias' is improperly formatted", "write family@version, e.g. al2023@latest or al2023@v20240807"},
	{"family is not supported", "use al2, al2023, bottlerocket, windows2019, windows2022 or windows2025"},
	{"windows families may only specify version 'latest'", "use windows2022@latest (or the matching family)"},
	{"empty tag keys or values aren't supported", "remove the tag or give it a value"},
	{"empty tag keys aren't supported", "remove the tag with the empty key"},
	{"tag contains a restricted tag", "Karpenter sets this tag itself; remove it"},
	{"must have only one blockDeviceMappings with rootVolume", "mark only one block device mapping rootVolume: true"},
	{"snapshotID or volumeSize must be defined", "give ebs a volumeSize (e.g. 20Gi) or a snapshotID"},
	{"snapshotID must be set when volumeInitializationRate is set", "set snapshotID, or drop volumeInitializationRate"},
	{"at least one of tcpEstablishedTimeout", "set a timeout, or drop connectionTracking"},
	{"imageGCHighThresholdPercent must be greater", "e.g. imageGCHighThresholdPercent: 85 with imageGCLowThresholdPercent: 80"},
	{"evictionSoft OwnerKey does not have a matching evictionSoftGracePeriod", "give every evictionSoft signal a grace period in evictionSoftGracePeriod"},
	{"evictionSoftGracePeriod OwnerKey does not have a matching evictionSoft", "give every evictionSoftGracePeriod signal a threshold in evictionSoft"},
	{"valid keys for eviction", "use the signals the message lists"},
	{"valid keys for kubeReserved", "use cpu, memory, ephemeral-storage or pid"},
	{"valid keys for systemReserved", "use cpu, memory, ephemeral-storage or pid"},
	{"cannot be a negative resource quantity", "reserve zero or more"},
	{"networkInterfaces must include a primary interface", "add {networkCardIndex: 0, deviceIndex: 0, interfaceType: interface}"},
	{"must not have duplicate networkCardIndex", "give every interface its own networkCardIndex/deviceIndex pair and use at most one efa-only per card"},
	{"expected at least one, got none, ['name', 'id']", "set name or id"},
	{"'name' and 'id' are mutually exclusive", "set name or id, not both"},
	{"subnetSelectorTerms cannot be empty", "add a term, e.g. - tags: {karpenter.sh/discovery: CLUSTER}"},
	{"securityGroupSelectorTerms cannot be empty", "add a term, e.g. - tags: {karpenter.sh/discovery: CLUSTER}"},
	{"path must stay inside the repository", "write the path relative to the repository root, without '..'"},
	{"set at most one of branch, tag, semver and commit", "keep one of branch, tag, semver and commit"},
	{"supported values:", "use one of the supported values (they are case-sensitive)"},
	{"must be a duration such as 30s, 5m or 720h, or Never", "durations use s, m and h: 720h for 30 days; Never turns it off"},
	{"must be a duration", "durations use s, m and h, e.g. 90s, 5m, 1h30m"},
	{"must be a resource quantity", "e.g. 500m or 2 for cpu, 512Mi or 16Gi for memory"},
	{"must be a label value", "e.g. team-a; no spaces or slashes"},
	{"must be a label key", "e.g. node.kubernetes.io/instance-type or example.com/team"},
	{"must be a qualified name", "e.g. example.com/dedicated; no spaces"},
	{"must be a lowercase DNS subdomain", "e.g. default or gpu-spot"},
	{"must be a node count or a percentage", `e.g. nodes: "10%" or nodes: "2"`},
	{"must be a cron schedule", `e.g. schedule: "0 9 * * mon-fri" with duration: 8h`},
	{"must be hours and/or minutes", "e.g. 8h, 30m or 1h30m"},
	{"must be a signed amount of dollars", `e.g. priceAdjustment: "-15%"`},
	{"must be a price in dollars", `e.g. price: "0.25"`},
	{"must be a size from 1Gi", "e.g. 20Gi or 100Gi"},
}
