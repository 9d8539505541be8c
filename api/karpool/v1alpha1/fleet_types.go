package v1alpha1

// FleetKind is the kind name of Fleet.
const FleetKind = "Fleet"

// Fleet lists the clusters whose pools one repository holds (a shared base and an overlay per
// cluster), so that `karpool plan --fleet` plans a change for all of them in one comment. It is
// a file, not an object of the cluster.
type Fleet struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   FileMetadata `json:"metadata"`
	Spec       FleetSpec    `json:"spec"`
}

// FleetSpec lists the clusters.
type FleetSpec struct {
	Clusters []FleetCluster `json:"clusters"`
}

// FleetCluster is one cluster: its pools' path in the repository, its region and where its
// workload comes from.
type FleetCluster struct {
	// Name is shown in the comment and names the cluster's commit status (karpool/plan: NAME).
	Name string `json:"name"`
	// Path is the directory its PoolSync reads (spec.path), usually a kustomize overlay.
	Path string `json:"path"`
	// Region selects the price catalog (default us-east-1).
	// +optional
	Region string `json:"region,omitempty"`
	// Workload is a workload file or directory, relative to the fleet file.
	// +optional
	Workload string `json:"workload,omitempty"`
	// StatusBranch reads the workload snapshot the cluster's PoolSync keeps on this branch of
	// the repository; PoolSync names that PoolSync (default: the one whose path is Path).
	// +optional
	StatusBranch string `json:"statusBranch,omitempty"`
	// +optional
	PoolSync string `json:"poolSync,omitempty"`
}
