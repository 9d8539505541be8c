package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq/ensure"
	"github.com/karpool/karpool/autoscaler/simulate"
)

// renderFormats are the outputs of `karpool render --aws`; plan reads the live account.
var renderFormats = []string{"cloudformation", "terraform-json", "json", "plan"}

// prereqFlags are the settings of the AWS prerequisites, shared by render and apply.
type prereqFlags struct {
	s        prereq.Settings
	aws      bool
	pools    string
	endpoint string
}

func (p *prereqFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&p.aws, "aws", false, "the AWS resources the pools need")
	f.StringVar(&p.pools, "pools", "", "file or directory with the EC2NodeClasses (kustomization or YAML files)")
	f.StringVar(&p.s.ClusterName, "cluster-name", "", "EKS cluster name (required)")
	f.StringVar(&p.s.Region, "region", "", "AWS region (required)")
	f.StringVar(&p.s.AccountID, "account-id", "", "AWS account ID, 12 digits (required to render; plan and apply default to the credentials' account)")
	f.StringVar(&p.s.Partition, "partition", "aws", "AWS partition: aws, aws-cn or aws-us-gov")
	f.StringVar(&p.s.OIDCIssuer, "oidc-issuer", "", "the cluster's OIDC issuer URL: the controller role trusts its service account through IRSA (plan and apply read it from EKS when neither this nor --pod-identity is set)")
	f.BoolVar(&p.s.PodIdentity, "pod-identity", false, "the controller role trusts EKS Pod Identity instead of IRSA")
	f.StringVar(&p.s.Namespace, "namespace", "karpool-system", "the controller's namespace")
	f.StringVar(&p.s.ServiceAccount, "service-account", "karpool", "the controller's service account")
	f.StringVar(&p.s.NodeRole, "node-role", "", "the default node role: its name, path/name or ARN, as in spec.role (default KarpenterNodeRole-<cluster>)")
	f.StringSliceVar(&p.s.InstanceProfileRoles, "instance-profile-role", nil, "role of an instance profile an EC2NodeClass names in spec.instanceProfile (the controller must be allowed to pass it); repeatable")
	f.StringSliceVar(&p.s.AllowedAccounts, "allow-account", nil, "account ID, besides the cluster's, whose roles --node-role, --instance-profile-role and the EC2NodeClasses' spec.role may name by ARN (an ARN of any other account is refused); repeatable")
	f.StringVar(&p.s.InterruptionQueue, "interruption-queue", "", "SQS queue name (default the cluster name)")
	f.StringVar(&p.s.NodeAccess, "node-access", prereq.AccessEntry, "how nodes join: access-entry (EKS access entry) or aws-auth")
	f.StringSliceVar(&p.s.Subnets, "subnet", nil, "subnet ID to tag for discovery; repeatable")
	f.StringSliceVar(&p.s.SecurityGroups, "security-group", nil, "security group ID to tag for discovery; repeatable")
	f.StringVar(&p.endpoint, "aws-endpoint", "", "send every AWS call to this endpoint (e.g. the simulator); default AWS itself (plan and apply)")
}

// classes reads the EC2NodeClasses of --pools as PoolSync would.
func (p *prereqFlags) classes(ctx context.Context) ([]awsv1.EC2NodeClass, error) {
	if !p.aws {
		return nil, usageError{errors.New("say what: --aws (the AWS resources the pools need)")}
	}
	if p.pools == "" {
		return nil, nil
	}
	ps, err := simulate.LoadPools(ctx, p.pools)
	if err != nil {
		return nil, err
	}
	return ps.Classes(), nil
}

// ensure plans, or applies, the prerequisites in the account of the SDK's credential chain.
func (p *prereqFlags) ensure(cmd *cobra.Command, classes []awsv1.EC2NodeClass, planOnly bool) error {
	cfg, err := awsconfig.LoadDefaultConfig(cmd.Context(), awsconfig.WithRegion(p.s.Region))
	if err != nil {
		return fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if p.endpoint != "" {
		cfg.BaseEndpoint = &p.endpoint
	}
	clients := ensure.NewClients(cfg)
	s, err := ensure.Discover(cmd.Context(), clients, p.s)
	if err != nil {
		return err
	}
	r, err := prereq.Render(s, classes)
	if err != nil {
		return usageError{err}
	}
	for _, w := range r.Warnings {
		fmt.Fprintln(cmd.ErrOrStderr(), "warning:", w)
	}
	changes, err := ensure.Run(cmd.Context(), clients, r, ensure.Options{PlanOnly: planOnly})
	fmt.Fprint(cmd.OutOrStdout(), ensure.Text(changes))
	return err
}

func newRenderCommand() *cobra.Command {
	var (
		p      prereqFlags
		format string
	)
	cmd := &cobra.Command{
		Use:   "render --aws --cluster-name C --region R --account-id A (--oidc-issuer URL | --pod-identity) [--pools PATH] [--format cloudformation|terraform-json|json|plan]",
		Short: "Render the AWS resources the pools need: node and controller roles, policy, instance profiles, interruption queue and rules",
		Long: `render --aws writes the AWS prerequisites of a cluster's pools: the node role (and every role an
EC2NodeClass names in spec.role) with its four managed policies; an instance profile per
EC2NodeClass with spec.role; the controller role, trusted by the controller's service account
through IRSA or EKS Pod Identity, with karpool's least-privilege policy (launch, tag and
terminate only what is tagged for this cluster and a NodePool, pass only the node roles, describe
only this cluster); the SQS interruption queue (300 s retention, SSE, TLS only) and its four
EventBridge rules; the discovery tag for subnets and security groups selected by ID or named
here; node access (EKS access entry, or the aws-auth entry); the spot service-linked role.

The EC2NodeClasses come from a repository, so their names are checked before anything renders:
spec.role, --node-role and --instance-profile-role are a role name (letters, digits and
+=,.@_-, at most 64), optionally after its IAM path (team/NodeRole), or the role's ARN, which must
be of the cluster's partition and account or of an account given with --allow-account;
--interruption-queue is an SQS queue name. A wildcard, or ${, in any of them is refused, and
nothing the EC2NodeClasses hold becomes a CloudFormation or Terraform substitution.

The EC2NodeClasses are read from --pools as PoolSync reads them (a kustomization is built).
--format cloudformation is a template parameterised by the cluster name (what CloudFormation
cannot do, such as tagging subnets it does not own, is listed in its Metadata);
terraform-json is a *.tf.json file; json is the resources for other tools; plan compares them
with the live account (credentials from the SDK's chain) and prints what "karpool apply --aws"
would do: + create, ~ update (with the fields), - delete, ! differs but is not karpool's.`,
		Example: `  karpool render --aws --cluster-name demo --region us-east-1 --account-id 111122223333 \
    --oidc-issuer https://oidc.eks.us-east-1.amazonaws.com/id/ABC --pools pools/ > karpool.cfn.yaml
  karpool render --aws --cluster-name demo --region eu-west-1 --account-id 111122223333 --pod-identity \
    --format terraform-json > karpool.tf.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(renderFormats, format) {
				return usageError{fmt.Errorf("--format %q: want one of %s", format, strings.Join(renderFormats, ", "))}
			}
			classes, err := p.classes(cmd.Context())
			if err != nil {
				return err
			}
			if format == "plan" {
				return p.ensure(cmd, classes, true)
			}
			return renderAWS(cmd.OutOrStdout(), cmd.ErrOrStderr(), p.s, classes, format)
		},
	}
	p.register(cmd.Flags())
	cmd.Flags().StringVar(&format, "format", "cloudformation", "output: "+strings.Join(renderFormats, ", "))
	return cmd
}

func newApplyCommand() *cobra.Command {
	var p prereqFlags
	cmd := &cobra.Command{
		Use:   "apply --aws --cluster-name C --region R [--account-id A] [--oidc-issuer URL | --pod-identity] [--pools PATH]",
		Short: "Create or correct the AWS resources the pools need, in the account of the SDK's credentials",
		Long: `apply --aws makes the account hold what "karpool render --aws" renders, through the AWS API,
in dependency order (roles before instance profiles, the queue before its rules), and prints
what it did. It changes only what karpool owns (tagged karpool.dev/cluster=<cluster>) apart
from adding the discovery tag to subnets and security groups; it deletes the cluster's instance
profiles and rules that left the desired state. Running it again changes nothing; a run that
failed half way is completed by the next. "karpool render --aws --format plan" shows the
changes without making them. The account ID and the cluster's OIDC issuer are read from
STS and EKS unless given.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			classes, err := p.classes(cmd.Context())
			if err != nil {
				return err
			}
			return p.ensure(cmd, classes, false)
		},
	}
	p.register(cmd.Flags())
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
