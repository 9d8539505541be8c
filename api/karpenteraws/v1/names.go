package v1

// The IAM names an EC2NodeClass holds, as IAM itself allows them. The patterns leave out every
// character that means something to a policy or a template (* and ?, IAM wildcards; $, policy
// variables and template interpolation), so no name from a repository can widen a statement.
const (
	// RolePattern is what an EC2NodeClass's spec.role and karpool's role settings may hold. As
	// Karpenter reads spec.role (it attaches the role by the part after the last /), that is a
	// role name of 1 to 64 characters, optionally after its IAM path (team/NodeRole,
	// /team/NodeRole), or the role's ARN. The groups are the partition (3), account (4), path
	// without its leading / (5) and name (7). The CUE schema (EC2NodeClass spec.role, PoolSync
	// spec.aws.nodeRole) and the PoolSync CRD hold the same pattern, which schema's tests check;
	// autoscaler/cloud/aws/prereq checks karpool's settings with it before anything renders.
	RolePattern = `^((arn:(aws|aws-cn|aws-us-gov):iam::([0-9]{12}):role/)|/)?(([A-Za-z0-9+=,.@_-]+/)*)([A-Za-z0-9+=,.@_-]{1,64})$`
	// InstanceProfilePattern is an instance profile name (spec.instanceProfile): Karpenter puts
	// it into launch templates as it is, so it has neither path nor ARN.
	InstanceProfilePattern = `^[A-Za-z0-9+=,.@_-]{1,128}$`
)
