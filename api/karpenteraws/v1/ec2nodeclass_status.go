package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EC2NodeClassStatus records what the selectors of an EC2NodeClass resolved to.
type EC2NodeClassStatus struct {
	// Subnets are the subnets currently matched by subnetSelectorTerms.
	//
	// +optional
	Subnets []Subnet `json:"subnets,omitempty"`

	// SecurityGroups are the security groups currently matched by securityGroupSelectorTerms.
	//
	// +optional
	SecurityGroups []SecurityGroup `json:"securityGroups,omitempty"`

	// CapacityReservations are the reservations currently matched by capacityReservationSelectorTerms.
	//
	// +optional
	CapacityReservations []CapacityReservation `json:"capacityReservations,omitempty"`

	// AMIs are the images currently matched by amiSelectorTerms.
	//
	// +optional
	AMIs []AMI `json:"amis,omitempty"`

	// InstanceProfile is the instance profile in use, either given in the spec or created for the role.
	//
	// +optional
	InstanceProfile string `json:"instanceProfile,omitempty"`

	// Conditions report readiness of the class and of each resolved resource kind.
	//
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Subnet is one resolved subnet.
type Subnet struct {
	// ID is the subnet id.
	//
	// +required
	ID string `json:"id"`

	// Zone is the subnet's availability zone name.
	//
	// +required
	Zone string `json:"zone"`

	// ZoneID is the subnet's availability zone id.
	//
	// +optional
	ZoneID string `json:"zoneID,omitempty"`
}

// SecurityGroup is one resolved security group.
type SecurityGroup struct {
	// ID is the security group id.
	//
	// +required
	ID string `json:"id"`

	// Name is the security group name.
	//
	// +optional
	Name string `json:"name,omitempty"`
}

// CapacityReservation is one resolved EC2 capacity reservation.
type CapacityReservation struct {
	// AvailabilityZone is where the reserved capacity lives.
	//
	// +required
	AvailabilityZone string `json:"availabilityZone"`

	// EndTime is when the reservation ends and its capacity is released; unset for open-ended ones.
	//
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// ID is the reservation id.
	//
	// +kubebuilder:validation:Pattern=`^cr-[0-9a-z]+$`
	// +required
	ID string `json:"id"`

	// InstanceMatchCriteria is "open" or "targeted".
	//
	// +kubebuilder:validation:Enum=open;targeted
	// +required
	InstanceMatchCriteria string `json:"instanceMatchCriteria"`

	// InstanceType is the instance type the reservation holds.
	//
	// +required
	InstanceType string `json:"instanceType"`

	// Interruptible tells whether the reserved capacity may be reclaimed.
	//
	// +optional
	Interruptible bool `json:"interruptible,omitempty"`

	// OwnerID is the 12-digit account id owning the reservation.
	//
	// +kubebuilder:validation:Pattern=`^[0-9]{12}$`
	// +required
	OwnerID string `json:"ownerID"`

	// ReservationType is "default" (an on-demand capacity reservation) or "capacity-block".
	//
	// +kubebuilder:default=default
	// +kubebuilder:validation:Enum=default;capacity-block
	// +optional
	ReservationType string `json:"reservationType,omitempty"`

	// State is "active", or "expiring" once a capacity block is inside EC2's reclaim window.
	//
	// +kubebuilder:default=active
	// +kubebuilder:validation:Enum=active;expiring
	// +optional
	State string `json:"state,omitempty"`
}

// AMI is one resolved image together with the node requirements it is valid for.
type AMI struct {
	// ID is the image id.
	//
	// +required
	ID string `json:"id"`

	// Name is the image name.
	//
	// +optional
	Name string `json:"name,omitempty"`

	// Requirements restrict the instance types (architecture, accelerators, ...) this image suits.
	//
	// +required
	Requirements []corev1.NodeSelectorRequirement `json:"requirements"`

	// Deprecated is true when EC2 reports the image as deprecated.
	//
	// +optional
	Deprecated bool `json:"deprecated,omitempty"`
}
