package prereq

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// tfRef is a reference karpool writes into the Terraform configuration: the one kind of string
// Terraform may interpolate.
type tfRef string

// tfLiteral escapes what Terraform reads in a string as an interpolation (${) or a directive (%{).
var tfLiteral = strings.NewReplacer("${", "$${", "%{", "%%{")

// TerraformJSON renders the resources in Terraform's JSON syntax (a *.tf.json file) for the AWS
// provider, with the settings' values written out. Every string but karpool's references is
// literal: Terraform reads strings in a *.tf.json file, and the keys of its maps, as templates.
func TerraformJSON(r *Resources) ([]byte, error) {
	res := map[string]map[string]any{}
	add := func(typ, name string, body map[string]any) {
		if res[typ] == nil {
			res[typ] = map[string]any{}
		}
		for n := 2; res[typ][name] != nil; n++ {
			name = strings.TrimRight(name, "0123456789") + fmt.Sprint(n)
		}
		res[typ][name] = tfLiterals(body)
	}
	// The controller's policies, by name: their attachments refer to them, so that Terraform
	// creates them first.
	policyRes := map[string]string{}
	for _, p := range r.ControllerPolicies {
		policyRes[p.Name] = "controller_" + tfName(p.Concern)
	}
	role := func(name string, role Role) {
		add("aws_iam_role", name, map[string]any{"name": role.Name, "path": role.Path, "assume_role_policy": role.Trust.JSON(), "tags": role.Tags})
		for _, arn := range role.ManagedPolicyARNs {
			policy := arn[strings.LastIndex(arn, "/")+1:]
			attach := map[string]any{"role": tfRef(fmt.Sprintf("${aws_iam_role.%s.name}", name)), "policy_arn": arn}
			if res, ok := policyRes[policy]; ok {
				attach["policy_arn"] = tfRef(fmt.Sprintf("${aws_iam_policy.%s.arn}", res))
			}
			add("aws_iam_role_policy_attachment", name+"_"+tfName(policy), attach)
		}
	}
	for _, nr := range r.NodeRoles {
		role("node_"+tfName(nr.Name), nr)
	}
	for _, p := range r.InstanceProfiles {
		add("aws_iam_instance_profile", tfName(p.NodeClass), map[string]any{"name": p.Name, "role": p.Role, "tags": p.Tags})
	}
	for _, p := range r.ControllerPolicies {
		add("aws_iam_policy", policyRes[p.Name], map[string]any{"name": p.Name, "policy": p.Document.JSON(), "tags": p.Tags})
	}
	role("controller", r.ControllerRole)
	add("aws_sqs_queue", "interruption", map[string]any{"name": r.Queue.Name, "message_retention_seconds": r.Queue.RetentionSeconds,
		"sqs_managed_sse_enabled": r.Queue.ManagedSSE, "tags": r.Queue.Tags})
	add("aws_sqs_queue_policy", "interruption", map[string]any{"queue_url": tfRef("${aws_sqs_queue.interruption.id}"), "policy": r.Queue.Policy.JSON()})
	for _, rule := range r.Rules {
		name := tfName(rule.Kind)
		add("aws_cloudwatch_event_rule", name, map[string]any{"name": rule.Name, "event_pattern": rule.Pattern, "tags": rule.Tags})
		add("aws_cloudwatch_event_target", name, map[string]any{"rule": tfRef(fmt.Sprintf("${aws_cloudwatch_event_rule.%s.name}", name)),
			"target_id": rule.TargetID, "arn": tfRef("${aws_sqs_queue.interruption.arn}")})
	}
	for i, a := range r.NodeAccess {
		if a.Mode == AccessEntry {
			add("aws_eks_access_entry", fmt.Sprintf("node_%d", i+1), map[string]any{"cluster_name": r.Settings.ClusterName, "principal_arn": a.RoleARN, "type": a.EntryType})
		}
	}
	if pi := r.PodIdentity; pi != nil {
		add("aws_eks_pod_identity_association", "controller", map[string]any{"cluster_name": r.Settings.ClusterName, "namespace": pi.Namespace,
			"service_account": pi.ServiceAccount, "role_arn": tfRef("${aws_iam_role.controller.arn}")})
	}
	for _, t := range r.DiscoveryTags {
		add("aws_ec2_tag", "discovery_"+tfName(t.ResourceID), map[string]any{"resource_id": t.ResourceID, "key": t.Key, "value": t.Value})
	}
	for _, svc := range r.ServiceLinkedRoles {
		add("aws_iam_service_linked_role", tfName(strings.TrimSuffix(svc, ".amazonaws.com")), map[string]any{"aws_service_name": svc})
	}
	return json.MarshalIndent(map[string]any{"resource": res}, "", "  ")
}

// tfLiterals escapes the strings of a resource's body, and the keys of its maps (tags).
func tfLiterals(v any) any {
	switch x := v.(type) {
	case string:
		return tfLiteral.Replace(x)
	case map[string]string:
		out := map[string]string{}
		for k, e := range x {
			out[tfLiteral.Replace(k)] = tfLiteral.Replace(e)
		}
		return out
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[tfLiteral.Replace(k)] = tfLiterals(e)
		}
		return out
	}
	return v // numbers, booleans and references
}

// tfName makes a Terraform resource name: lower case letters, digits and underscores.
func tfName(s string) string {
	var b strings.Builder
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}
