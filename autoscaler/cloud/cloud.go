// Package cloud defines the narrow interface between karpool's autoscaler and the cloud that
// runs its nodes. The autoscaler decides what to launch (a NodeClaim with instance-type options);
// a CloudProvider turns that decision into an instance, finds instances again, removes them and
// says which instance types a node class can offer. The one implementation is cloud/aws.
package cloud

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/karpool/karpool/api/karpenter/v1"
	awsv1 "github.com/karpool/karpool/api/karpenteraws/v1"
	"github.com/karpool/karpool/autoscaler/catalog"
)

// CloudProvider launches and tracks the instances behind NodeClaims. Implementations take the
// node class as an argument instead of reading it from the cluster, so they stay free of
// Kubernetes I/O; the caller resolves spec.nodeClassRef.
type CloudProvider interface {
	// Create launches one instance for the NodeClaim, choosing among the instance types, zones
	// and capacity types its requirements allow, and returns a copy of the NodeClaim with
	// status.providerID, status.imageID, capacity, allocatable and the launch labels
	// (instance type, zone, capacity type) filled in. Calling Create again for the same
	// NodeClaim (same UID) returns the same instance instead of launching a second one. When no
	// option has capacity the error is an *InsufficientCapacityError. status.nodeName, when the
	// cloud already knows it, is the name the instance's Node is expected to register under: a
	// hint for handing pods over early, not recorded on the NodeClaim.
	Create(ctx context.Context, nc *karpv1.NodeClaim, nodeClass *awsv1.EC2NodeClass) (*karpv1.NodeClaim, error)
	// Delete terminates the instance behind the NodeClaim's status.providerID. It returns an
	// error wrapping ErrNotFound when the instance is already gone.
	Delete(ctx context.Context, nc *karpv1.NodeClaim) error
	// Get returns the NodeClaim view of the instance with this provider ID (ErrNotFound when it
	// does not exist or has terminated).
	Get(ctx context.Context, providerID string) (*karpv1.NodeClaim, error)
	// List returns the NodeClaim view of every live instance this cluster launched.
	List(ctx context.Context) ([]*karpv1.NodeClaim, error)
	// InstanceTypes returns the instance types a node of this class can be, with offerings
	// limited to the class's zones and marked unavailable while they lack capacity.
	InstanceTypes(ctx context.Context, nodeClass *awsv1.EC2NodeClass) ([]catalog.InstanceType, error)
	// IsDrifted reports why the NodeClaim's instance no longer matches its node class ("" when
	// it still matches): another AMI, subnet or security groups would be chosen today.
	IsDrifted(ctx context.Context, nc *karpv1.NodeClaim, nodeClass *awsv1.EC2NodeClass) (DriftReason, error)
	// RepairPolicies are the node conditions that make a node unhealthy, and for how long each
	// is tolerated before node repair replaces the node (NodeRepair gate).
	RepairPolicies() []RepairPolicy
	// Name names the cloud in metrics ("aws").
	Name() string
}

// RepairPolicy is one unhealthy node condition: a node whose condition of this type has had
// this status for longer than TolerationDuration is replaced.
type RepairPolicy struct {
	ConditionType      corev1.NodeConditionType
	ConditionStatus    corev1.ConditionStatus
	TolerationDuration time.Duration
}

// DriftReason says what drifted; empty means nothing did.
type DriftReason string

// Drift reasons.
const (
	DriftAMI           DriftReason = "AMIDrift"
	DriftSubnet        DriftReason = "SubnetDrift"
	DriftSecurityGroup DriftReason = "SecurityGroupDrift"
)

// ErrNotFound is wrapped by errors about instances that do not exist (any more).
var ErrNotFound = errors.New("instance not found")

// InsufficientCapacityError says that none of a NodeClaim's launch options had capacity. The
// failed offerings are already marked unavailable, so a new NodeClaim computed after this error
// avoids them.
type InsufficientCapacityError struct {
	NodeClaim string
	// Offerings are the options that failed, as "type/zone/capacity-type".
	Offerings []string
}

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("nodeclaim %s: no capacity for any launch option (tried %d: %v); the offerings are marked unavailable for a few minutes, create a new NodeClaim to retry with other options",
		e.NodeClaim, len(e.Offerings), e.Offerings)
}
