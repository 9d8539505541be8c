package switchover

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// NewChecker returns a Checker that reads the Leases from the cluster.
func NewChecker(kube *rest.Config, leases []types.NamespacedName) (*Checker, error) {
	cs, err := clientset(kube)
	if err != nil {
		return nil, err
	}
	return &Checker{Leases: leases, Get: func(ctx context.Context, key types.NamespacedName) (*coordinationv1.Lease, error) {
		return cs.CoordinationV1().Leases(key.Namespace).Get(ctx, key.Name, metav1.GetOptions{})
	}}, nil
}

// LeaderLock returns karpool's leader-election lock on the Lease ns/name, held back by the
// checker's Karpenter Leases (see Lock). The identity is controller-runtime's: host name and a
// random suffix.
func LeaderLock(kube *rest.Config, ns, name string, checker *Checker, log logr.Logger) (*Lock, error) {
	cs, err := clientset(kube)
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, err
	}
	own, err := resourcelock.New(resourcelock.LeasesResourceLock, ns, name, cs.CoreV1(), cs.CoordinationV1(),
		resourcelock.ResourceLockConfig{Identity: host + "_" + string(uuid.NewUUID())})
	if err != nil {
		return nil, fmt.Errorf("leader-election lock: %w", err)
	}
	return NewLock(own, checker, log), nil
}

// clientset is a client for the Leases. Its timeout stays under the renew deadline (10 s), so
// one hung request cannot cost the lead, as controller-runtime sets its own.
func clientset(kube *rest.Config) (*kubernetes.Clientset, error) {
	cfg := rest.AddUserAgent(rest.CopyConfig(kube), "karpool-leader-election")
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("lease client: %w", err)
	}
	return cs, nil
}
