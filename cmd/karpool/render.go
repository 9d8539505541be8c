package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/autoscaler/simulate"
)

// renderFormats are the outputs of `karpool render --aws`.
var renderFormats = []string{"cloudformation", "terraform-json", "json"}

func newRenderCommand() *cobra.Command {
	var (
		s      prereq.Settings
		aws    bool
		pools  string
		format string
	)
	cmd := &cobra.Command{
		Use:   "render --aws --cluster-name C --region R --account-id A (--oidc-issuer URL | --pod-identity) [--pools PATH] [--format cloudformation|terraform-json|json]",
		Short: "Render the AWS resources the pools need: node and controller roles, policy, instance profiles, interruption queue and rules",
		Long: `render --aws writes the AWS prerequisites of a cluster's pools: the node role (and every role an
EC2NodeClass names in spec.role) with its four managed policies; an instance profile per
EC2NodeClass with spec.role; the controller role, trusted by the controller's service account
through IRSA or EKS Pod Identity, with karpool's least-privilege policy (launch, tag and
terminate only what is tagged for this cluster and a NodePool, pass only the node roles, describe
only this cluster); the SQS interruption queue (300 s retention, SSE, TLS only) and its four
EventBridge rules; the discovery tag for subnets and security groups selected by ID or named
here; node access (EKS access entry, or the aws-auth entry); the spot service-linked role.

The EC2NodeClasses are read from --pools as PoolSync reads them (a kustomization is built).
--format cloudformation is a template parameterised by the cluster name (what CloudFormation
cannot do, such as tagging subnets it does not own, is listed in its Metadata);
terraform-json is a *.tf.json file; json is the resources for other tools.`,
		Example: `  karpool render --aws --cluster-name demo --region us-east-1 --account-id 111122223333 \
    --oidc-issuer https://oidc.eks.us-east-1.amazonaws.com/id/ABC --pools pools/ > karpool.cfn.yaml
  karpool render --aws --cluster-name demo --region eu-west-1 --account-id 111122223333 --pod-identity \
    --format terraform-json > karpool.tf.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !aws {
				return usageError{errors.New("say what to render: --aws (the AWS resources the pools need)")}
			}
			if !slices.Contains(renderFormats, format) {
				return usageError{fmt.Errorf("--format %q: want one of %s", format, strings.Join(renderFormats, ", "))}
			}
			var classes []awsv1.EC2NodeClass
			if pools != "" {
				ps, err := simulate.LoadPools(pools)
				if err != nil {
					return err
				}
				classes = ps.Classes()
			}
			return renderAWS(cmd.OutOrStdout(), cmd.ErrOrStderr(), s, classes, format)
		},
	}
	f := cmd.Flags()
	f.BoolVar(&aws, "aws", false, "render the AWS resources the pools need")
	f.StringVar(&pools, "pools", "", "file or directory with the EC2NodeClasses (kustomization or YAML files)")
	f.StringVar(&format, "format", "cloudformation", "output: "+strings.Join(renderFormats, ", "))
	f.StringVar(&s.ClusterName, "cluster-name", "", "EKS cluster name (required)")
	f.StringVar(&s.Region, "region", "", "AWS region (required)")
	f.StringVar(&s.AccountID, "account-id", "", "AWS account ID, 12 digits (required)")
	f.StringVar(&s.Partition, "partition", "aws", "AWS partition: aws, aws-cn or aws-us-gov")
	f.StringVar(&s.OIDCIssuer, "oidc-issuer", "", "the cluster's OIDC issuer URL: the controller role trusts its service account through IRSA")
	f.BoolVar(&s.PodIdentity, "pod-identity", false, "the controller role trusts EKS Pod Identity instead of IRSA")
	f.StringVar(&s.Namespace, "namespace", "karpool-system", "the controller's namespace")
	f.StringVar(&s.ServiceAccount, "service-account", "karpool", "the controller's service account")
	f.StringVar(&s.NodeRole, "node-role", "", "the default node role's name (default KarpenterNodeRole-<cluster>)")
	f.StringSliceVar(&s.InstanceProfileRoles, "instance-profile-role", nil, "role of an instance profile an EC2NodeClass names in spec.instanceProfile (the controller must be allowed to pass it); repeatable")
	f.StringVar(&s.InterruptionQueue, "interruption-queue", "", "SQS queue name (default the cluster name)")
	f.StringVar(&s.NodeAccess, "node-access", prereq.AccessEntry, "how nodes join: access-entry (EKS access entry) or aws-auth")
	f.StringSliceVar(&s.Subnets, "subnet", nil, "subnet ID to tag for discovery; repeatable")
	f.StringSliceVar(&s.SecurityGroups, "security-group", nil, "security group ID to tag for discovery; repeatable")
	return cmd
}

func renderAWS(out, errOut io.Writer, s prereq.Settings, classes []awsv1.EC2NodeClass, format string) error {
	r, err := prereq.Render(s, classes)
	if err != nil {
		return usageError{err}
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(errOut, "warning:", w)
	}
	var data []byte
	switch format {
	case "cloudformation":
		data, err = prereq.CloudFormation(s, classes)
	case "terraform-json":
		data, err = prereq.TerraformJSON(r)
	default:
		data, err = json.MarshalIndent(r, "", "  ")
	}
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", strings.TrimRight(string(data), "\n"))
	return err
}
