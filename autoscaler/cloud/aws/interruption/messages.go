// Package interruption consumes the SQS queue that EventBridge fills with EC2 and AWS Health
// events about the cluster's instances (Karpenter's interruption queue, --interruption-queue):
// a spot interruption warning, a scheduled change, or an instance stopping or terminating makes
// karpool delete the instance's NodeClaim at once, so its pods are evicted and placed elsewhere
// before AWS takes the instance away; a rebalance recommendation is only reported. Parse is the
// pure core; Controller polls the queue.
package interruption

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Kind is what a message asks of karpool.
type Kind string

// The message kinds, named as Karpenter's metrics label them.
const (
	SpotInterruption        Kind = "spot_interrupted"
	RebalanceRecommendation Kind = "rebalance_recommendation"
	ScheduledChange         Kind = "scheduled_change"
	StateChange             Kind = "instance_state_change"
	// Noop is a well-formed event karpool has nothing to do for (another source or detail
	// type, a state such as running or pending).
	Noop Kind = "no_op"
)

// Message is one parsed queue message.
type Message struct {
	Kind Kind
	// InstanceIDs are the instances the event is about.
	InstanceIDs []string
	// State is the new instance state of a StateChange.
	State string
	// Detail describes the event for logs and Kubernetes events.
	Detail string
}

// Disrupts reports whether the message means the instances are going away.
func (m Message) Disrupts() bool {
	return m.Kind == SpotInterruption || m.Kind == ScheduledChange || m.Kind == StateChange
}

// envelope is the part of an EventBridge event karpool reads.
type envelope struct {
	Source     string          `json:"source"`
	DetailType string          `json:"detail-type"`
	Detail     json.RawMessage `json:"detail"`
}

// ec2Detail is the detail of the EC2 events karpool acts on.
type ec2Detail struct {
	InstanceID string `json:"instance-id"`
	State      string `json:"state"`
}

// healthDetail is the detail of an AWS Health event.
type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCategory string `json:"eventTypeCategory"`
	EventTypeCode     string `json:"eventTypeCode"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// stopping are the instance states after which the node is going away (Karpenter's list).
var stopping = map[string]bool{"stopping": true, "stopped": true, "shutting-down": true, "terminated": true}

// Parse reads an EventBridge event as the queue delivers it. A body that is not such an event,
// or an event about the instances that names none, is an error (the message is deleted anyway:
// no retry makes it readable).
func Parse(body string) (Message, error) {
	var env envelope
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		return Message{}, fmt.Errorf("not an EventBridge event: %w", err)
	}
	switch {
	case env.Source == "aws.ec2" && env.DetailType == "EC2 Spot Instance Interruption Warning":
		return ec2Message(env, SpotInterruption)
	case env.Source == "aws.ec2" && env.DetailType == "EC2 Instance Rebalance Recommendation":
		return ec2Message(env, RebalanceRecommendation)
	case env.Source == "aws.ec2" && env.DetailType == "EC2 Instance State-change Notification":
		m, err := ec2Message(env, StateChange)
		if err == nil && !stopping[m.State] {
			m.Kind = Noop
		}
		return m, err
	case env.Source == "aws.health" && env.DetailType == "AWS Health Event":
		var d healthDetail
		if err := json.Unmarshal(env.Detail, &d); err != nil {
			return Message{}, fmt.Errorf("AWS Health event: detail: %w", err)
		}
		if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
			return Message{Kind: Noop, Detail: d.Service + " " + d.EventTypeCategory}, nil
		}
		m := Message{Kind: ScheduledChange, Detail: "scheduled change " + d.EventTypeCode}
		for _, e := range d.AffectedEntities {
			if strings.HasPrefix(e.EntityValue, "i-") {
				m.InstanceIDs = append(m.InstanceIDs, e.EntityValue)
			}
		}
		if len(m.InstanceIDs) == 0 {
			return Message{}, fmt.Errorf("AWS Health scheduled change %s names no instance in detail.affectedEntities", d.EventTypeCode)
		}
		return m, nil
	case env.Source == "" || env.DetailType == "":
		return Message{}, fmt.Errorf("not an EventBridge event: no source or detail-type")
	}
	return Message{Kind: Noop, Detail: env.Source + " " + env.DetailType}, nil
}

func ec2Message(env envelope, kind Kind) (Message, error) {
	var d ec2Detail
	if err := json.Unmarshal(env.Detail, &d); err != nil {
		return Message{}, fmt.Errorf("%s: detail: %w", env.DetailType, err)
	}
	if !strings.HasPrefix(d.InstanceID, "i-") {
		return Message{}, fmt.Errorf("%s: detail.instance-id %q is not an instance ID", env.DetailType, d.InstanceID)
	}
	m := Message{Kind: kind, InstanceIDs: []string{d.InstanceID}, State: d.State, Detail: env.DetailType}
	if d.State != "" {
		m.Detail += " (" + d.State + ")"
	}
	return m, nil
}
