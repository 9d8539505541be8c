// Package policycheck checks the AWS requests recorded by testbed/awssim against karpool's
// least-privilege controller policy, the very document the AWS prerequisites render
// (prereq.ControllerPolicy): tests run karpool's AWS code against the simulator and hand
// srv.Calls() to Check. Each request becomes the authorizations IAM would evaluate for it (a
// CreateFleet needs the launch template, the capacity reservation it targets, the tags of
// everything it creates, tagging at creation and iam:PassRole of the profile's role), with the condition keys IAM would see, and each is
// decided against the policy's statements (internal/iampolicy). Resource tags are learnt by
// replaying the recorded requests and responses in order.
package policycheck

import (
	"encoding/json"
	"fmt"

	"github.com/karpool/karpool/autoscaler/cloud/aws/prereq"
	"github.com/karpool/karpool/internal/iampolicy"
	"github.com/karpool/karpool/testbed/awssim"
)

// Params are the settings the policy is rendered with.
type Params struct {
	ClusterName string
	Region      string
	// AccountID is the account of the resources; default the simulator's.
	AccountID string
	// NodeRole is the name of the node role: the only role iam:PassRole lets the controller
	// hand to EC2.
	NodeRole string
	// InterruptionQueue is the SQS queue name; default the cluster name.
	InterruptionQueue string
	// AccessKeyID, when set, limits the check to the requests signed with it (the controller's
	// identity); requests of other keys (test setup) are only replayed to learn resource tags.
	AccessKeyID string
}

// Violation is a recorded request the policy does not allow.
type Violation struct {
	Call awssim.Call
	// Request is the authorization that was denied (action and resource).
	Request string
	Reason  string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s:%s: %s is denied: %s; input: %s", v.Call.Service, v.Call.Action, v.Request, v.Reason, describe(v.Call.Input))
}

// Check returns the recorded requests (signed with p.AccessKeyID when set) that the controller
// policy does not allow, in order.
func Check(p Params, calls []awssim.Call) []Violation {
	return CheckPolicy(p, ControllerPolicy(p), calls)
}

// ControllerPolicy is the controller policy Check decides against: prereq.ControllerPolicy
// rendered with p.
func ControllerPolicy(p Params) iampolicy.Document {
	if p.AccountID == "" {
		p.AccountID = awssim.DefaultAccountID
	}
	return prereq.ControllerPolicy(prereq.Settings{ClusterName: p.ClusterName, Region: p.Region, AccountID: p.AccountID,
		NodeRole: p.NodeRole, InterruptionQueue: p.InterruptionQueue}, []string{p.NodeRole})
}

// CheckPolicy is Check against another policy document (a changed controller policy: tests show
// which of its statements a request needs).
func CheckPolicy(p Params, policy iampolicy.Document, calls []awssim.Call) []Violation {
	if p.AccountID == "" {
		p.AccountID = awssim.DefaultAccountID
	}
	s := newState(p)
	var out []Violation
	for _, c := range calls {
		if p.AccessKeyID == "" || c.AccessKeyID == p.AccessKeyID {
			out = append(out, s.check(policy, c)...)
		}
		if c.ErrorCode == "" {
			s.learn(c)
		}
	}
	return out
}

func (s *state) check(policy iampolicy.Document, c awssim.Call) []Violation {
	reqs, err := s.authorizations(c)
	if err != nil {
		return []Violation{{Call: c, Request: c.Service + ":" + c.Action, Reason: err.Error()}}
	}
	var out []Violation
	for _, r := range reqs {
		if d := iampolicy.Decide(r, policy); !d.Allowed {
			out = append(out, Violation{Call: c, Request: r.Action + " on " + r.Resource, Reason: d.Reason})
		}
	}
	return out
}

// describe prints a request input as JSON without its empty fields, shortened.
func describe(in any) string {
	var s string
	var v any
	raw, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(raw, &v)
	}
	if err == nil {
		raw, err = json.Marshal(compact(v))
		s = string(raw)
	}
	if err != nil {
		s = fmt.Sprintf("%+v", in)
	}
	if len(s) > 2000 {
		s = s[:2000] + "…"
	}
	return s
}

// compact drops nulls, empty strings, empty lists and empty objects.
func compact(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e = compact(e); e == nil {
				delete(x, k)
			} else {
				x[k] = e
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		out := x[:0]
		for _, e := range x {
			if e = compact(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case string:
		if x == "" {
			return nil
		}
	}
	return v
}
