package awssim

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Duration is a time.Duration that reads and writes JSON as a Go duration string ("2s") or a
// number of seconds.
type Duration struct{ time.Duration }

func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		d.Duration = v
		return nil
	}
	var n float64
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("duration must be a string like \"2s\" or a number of seconds")
	}
	d.Duration = time.Duration(n * float64(time.Second))
	return nil
}

// Faults are the failures and delays the simulator injects. Operations are named
// "service:Action" (the IAM action names: "ec2:CreateFleet", "sqs:ReceiveMessage"); "ec2:*" and
// "*" match every action of a service or every action.
type Faults struct {
	// ThrottleRate is the fraction (0–1) of API requests rejected with the service's throttling
	// error (EC2 RequestLimitExceeded 503, IAM/STS Throttling 400, JSON services
	// ThrottlingException 400, EKS ThrottlingException 429).
	ThrottleRate float64 `json:"throttleRate,omitempty"`
	// ThrottleOperations limits throttling to these operations; empty means every operation.
	ThrottleOperations []string `json:"throttleOperations,omitempty"`
	// Errors inject other errors at a rate per operation.
	Errors []ErrorFault `json:"errors,omitempty"`
	// InsufficientCapacity makes launches of a type in a zone with a capacity type fail with
	// InsufficientInstanceCapacity. Empty fields match anything.
	InsufficientCapacity []CapacityFault `json:"insufficientCapacity,omitempty"`
	// LaunchLatency is how long a new instance stays pending before it runs.
	LaunchLatency Duration `json:"launchLatency,omitempty"`
	// RegistrationLatency is how long after running its Node registers (node bootstrap).
	RegistrationLatency Duration `json:"registrationLatency,omitempty"`
	// TerminationLatency is how long a terminating instance stays shutting-down.
	TerminationLatency Duration `json:"terminationLatency,omitempty"`
	// APILatency delays responses of matching operations.
	APILatency map[string]Duration `json:"apiLatency,omitempty"`
	// ResponseLatency delays the response of matching operations after they took effect (the
	// call is already in Calls): a client that crashes or times out meanwhile never learns the
	// outcome, like a response lost on the network.
	ResponseLatency map[string]Duration `json:"responseLatency,omitempty"`
}

// ErrorFault fails an operation at a rate.
type ErrorFault struct {
	Operation string  `json:"operation"`
	Rate      float64 `json:"rate"`
	// Code, Message and Status default to the service's internal error (EC2 InternalError 500,
	// IAM/STS/JSON InternalFailure 500, EKS ServerException 500).
	Code    string `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
	Status  int    `json:"status,omitempty"`
}

// CapacityFault is a pool without capacity.
type CapacityFault struct {
	InstanceType string `json:"instanceType,omitempty"`
	Zone         string `json:"zone,omitempty"`
	// CapacityType is on-demand or spot.
	CapacityType string `json:"capacityType,omitempty"`
}

func opMatches(pattern, svc, action string) bool {
	if pattern == "*" || pattern == svc+":*" || pattern == svc+":"+action {
		return true
	}
	return !strings.Contains(pattern, ":") && pattern == action
}

// SetFaults replaces the injected faults.
func (s *Server) SetFaults(f Faults) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = f
	s.logf("faults set: %s", mustJSON(f))
}

// Faults returns the injected faults.
func (s *Server) Faults() Faults {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func throttleError(p protocol) *apiError {
	switch p {
	case protoEC2Query:
		return apiErr(503, "RequestLimitExceeded", "Request limit exceeded.")
	case protoQuery:
		return apiErr(400, "Throttling", "Rate exceeded")
	case protoRestJSON:
		return apiErr(429, "ThrottlingException", "Rate exceeded")
	default:
		return &apiError{Status: 400, Code: "ThrottlingException", QueryCode: "ThrottlingException", Message: "Rate exceeded"}
	}
}

// injectFaults applies latency, throttling and error faults to one request. It returns an error
// to send instead of running the operation.
func (s *Server) injectFaults(rc *reqCtx, action string) (any, error) {
	svc := rc.svc.signingName
	s.mu.Lock()
	var delay time.Duration
	for pat, d := range s.faults.APILatency {
		if opMatches(pat, svc, action) && d.Duration > delay {
			delay = d.Duration
		}
	}
	var fault *apiError
	if s.faults.ThrottleRate > 0 {
		applies := len(s.faults.ThrottleOperations) == 0
		for _, p := range s.faults.ThrottleOperations {
			applies = applies || opMatches(p, svc, action)
		}
		if applies && s.rng.Float64() < s.faults.ThrottleRate {
			fault = throttleError(rc.svc.proto)
		}
	}
	if fault == nil {
		for _, e := range s.faults.Errors {
			if !opMatches(e.Operation, svc, action) || s.rng.Float64() >= e.Rate {
				continue
			}
			fault = &apiError{Status: 500, Code: internalCode(rc.svc.proto), Message: "An internal error has occurred", Receiver: true}
			if e.Code != "" {
				fault.Code, fault.QueryCode = e.Code, e.Code
				fault.Status = 400
			}
			if e.Status != 0 {
				fault.Status = e.Status
			}
			if e.Message != "" {
				fault.Message = e.Message
			}
			break
		}
	}
	s.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-rc.ctx.Done():
			t.Stop()
			return nil, rc.ctx.Err()
		}
	}
	if fault != nil {
		return nil, fault
	}
	return nil, nil
}

// delayResponse waits ResponseLatency for a completed operation.
func (s *Server) delayResponse(rc *reqCtx, action string) error {
	s.mu.Lock()
	var delay time.Duration
	for pat, d := range s.faults.ResponseLatency {
		if opMatches(pat, rc.svc.signingName, action) && d.Duration > delay {
			delay = d.Duration
		}
	}
	s.mu.Unlock()
	if delay <= 0 {
		return nil
	}
	t := time.NewTimer(delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-rc.ctx.Done():
		return rc.ctx.Err()
	}
}

// Call is one API request the simulator answered, for tests that check what a client did
// (including least-privilege checks: Service:Action is the IAM action).
type Call struct {
	Time        time.Time
	Service     string // signing name: ec2, iam, sts, sqs, events, ssm, pricing, eks
	Action      string
	AccessKeyID string
	RequestID   string
	// Input is the decoded request: the aws-sdk-go-v2 input struct (e.g. *ec2.CreateFleetInput),
	// or the simulator's own struct for the few inputs the SDK types cannot decode from JSON.
	Input any
	// Output is the SDK output struct sent back; nil on error.
	Output any
	// ErrorCode is the AWS error code sent back, "" on success.
	ErrorCode string
}

const maxCalls = 100000

func (s *Server) recordCall(c Call) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) >= maxCalls {
		s.calls = s.calls[len(s.calls)-maxCalls/2:]
	}
	s.calls = append(s.calls, c)
}

// Calls returns the requests answered so far, oldest first.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Mutating says whether the call can change the account: any action but a Get, List or
// Describe.
func (c Call) Mutating() bool {
	for _, read := range []string{"Get", "List", "Describe"} {
		if strings.HasPrefix(c.Action, read) {
			return false
		}
	}
	return true
}

// ResetCalls forgets the recorded requests.
func (s *Server) ResetCalls() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}
