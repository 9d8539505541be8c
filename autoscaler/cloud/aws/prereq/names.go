package prereq

import (
	"fmt"
	"regexp"
	"slices"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
)

// The names that reach policies, ARNs and resource names are checked against IAM's and SQS's
// own rules before anything renders. Those rules leave out every character that means something
// to a policy or a template: * and ? (IAM wildcards) and $ (IAM policy variables, CloudFormation
// Fn::Sub and Terraform interpolation), so that no name taken from a repository can widen a
// statement or be substituted. The API's own patterns (awsv1.RolePattern,
// awsv1.InstanceProfilePattern) are shared with the CUE schema.
var (
	rolePattern            = regexp.MustCompile(awsv1.RolePattern)
	instanceProfilePattern = regexp.MustCompile(awsv1.InstanceProfilePattern)
	// An SQS queue name; a FIFO queue's ends in .fifo, within the same 80 characters.
	queuePattern = regexp.MustCompile(`^([A-Za-z0-9_-]{1,80}|[A-Za-z0-9_-]{1,75}\.fifo)$`)
	subnetID     = regexp.MustCompile(`^subnet-[0-9a-z]+$`)
	groupID      = regexp.MustCompile(`^sg-[0-9a-z]+$`)
	// The issuer URL of an EKS cluster (https://oidc.eks.<region>.amazonaws.com/id/<id>), or of
	// another OIDC provider: it becomes part of a principal ARN and of condition keys.
	issuerURL = regexp.MustCompile(`^https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~-]+)*/?$`)
)

// roleRef is a role as spec.role or a setting names it, with the partition and account an ARN
// gives or the settings imply. path starts and ends with /; where is what named the role.
type roleRef struct{ partition, account, path, name, where string }

func (r roleRef) arn() string {
	return fmt.Sprintf("arn:%s:iam::%s:role%s%s", r.partition, r.account, r.path, r.name)
}

// role reads a role named at where (an object and field, or a setting). A name or path/name is
// a role of the settings' account; an ARN must be of their partition, and of their account or one
// of AllowedAccounts: taking only its name would pass a role of this account instead.
func (s Settings) role(where, value string) (roleRef, error) {
	m := rolePattern.FindStringSubmatch(value)
	if m == nil {
		return roleRef{}, fmt.Errorf("%s %q is not an IAM role: write the role's name (1 to 64 letters, digits and + = , . @ _ -), optionally after its path (team/NodeRole), or its ARN (arn:%s:iam::%s:role/NodeRole)",
			where, value, s.Partition, s.AccountID)
	}
	ref := roleRef{partition: s.Partition, account: s.AccountID, path: "/" + m[5], name: m[7], where: where}
	if m[2] == "" {
		return ref, nil
	}
	ref.partition, ref.account = m[3], m[4]
	switch {
	case ref.partition != s.Partition:
		return roleRef{}, fmt.Errorf("%s %q is a role of partition %s, but the cluster is in %s, and IAM roles do not cross partitions: name a role of partition %s",
			where, value, ref.partition, s.Partition, s.Partition)
	case ref.account != s.AccountID && !slices.Contains(s.AllowedAccounts, ref.account):
		return roleRef{}, fmt.Errorf("%s %q is a role of account %s, not of the cluster's account %s: name a role of account %s, or allow account %s (karpool render/apply --allow-account %s; PoolSync spec.aws.allowedAccounts)",
			where, value, ref.account, s.AccountID, s.AccountID, ref.account, ref.account)
	}
	return ref, nil
}

// roles reads the roles of a setting.
func (s Settings) roles(where string, values []string) ([]roleRef, error) {
	var out []roleRef
	for _, v := range values {
		ref, err := s.role(where, v)
		if err != nil {
			return nil, err
		}
		out = append(out, ref)
	}
	return out, nil
}

// checkNames checks the names the settings put into resource names and ARNs, beyond the cluster
// name, region and account that validateScope checks.
func (s Settings) checkNames() error {
	if !queuePattern.MatchString(s.InterruptionQueue) {
		return fmt.Errorf("AWS settings: interruption queue %q (--interruption-queue, PoolSync spec.aws.interruptionQueue; default the cluster name) is not an SQS queue name: 1 to 80 letters, digits, - and _ (a FIFO queue's ending in .fifo)", s.InterruptionQueue)
	}
	for _, a := range s.AllowedAccounts {
		if !account.MatchString(a) {
			return fmt.Errorf("AWS settings: allowed account %q (--allow-account, PoolSync spec.aws.allowedAccounts) is not an account ID: 12 digits", a)
		}
	}
	return nil
}

// instanceProfileWarning says why Karpenter cannot launch with the instance profile a class names.
// It is a warning, not an error: the profile reaches no policy and no resource karpool renders.
func instanceProfileWarning(class, profile string) (string, bool) {
	if instanceProfilePattern.MatchString(profile) {
		return "", false
	}
	return fmt.Sprintf("EC2NodeClass %s spec.instanceProfile %q is not an instance profile name, so Karpenter cannot launch with it: name an existing profile (1 to 128 letters, digits and + = , . @ _ -, no path)", class, profile), true
}

// checkIDs checks the IDs of subnets and security groups that get the discovery tag, named in
// the fields given. A class's come from a repository, and the CRD's patterns for them are not
// anchored: the API server lets anything through that contains an ID.
func checkIDs(subnetField, groupField string, subnets, groups []string) error {
	for _, id := range subnets {
		if !subnetID.MatchString(id) {
			return fmt.Errorf("%s %q is not a subnet ID: write it as subnet-0123456789abcdef0", subnetField, id)
		}
	}
	for _, id := range groups {
		if !groupID.MatchString(id) {
			return fmt.Errorf("%s %q is not a security group ID: write it as sg-0123456789abcdef0", groupField, id)
		}
	}
	return nil
}
