package awssim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// adminPrefix is where the admin API lives; it needs no AWS signature.
//
// Admin API (JSON bodies and responses; errors are {"error": "..."} with status 400/404):
//
//	GET  /_awssim/                           this index
//	GET  /_awssim/state                      account, instances, queues, rules, event delivery counters
//	GET  /_awssim/faults                     the injected faults (Faults)
//	PUT  /_awssim/faults                     replace them, e.g. {"throttleRate":0.3,
//	                                         "insufficientCapacity":[{"instanceType":"m5.large","zone":"us-east-1a","capacityType":"on-demand"}],
//	                                         "errors":[{"operation":"ec2:CreateFleet","rate":0.5}],
//	                                         "launchLatency":"2s","registrationLatency":"1s","terminationLatency":"1s",
//	                                         "apiLatency":{"ec2:*":"50ms"}}
//	POST /_awssim/spot-interruption          {"instanceId":"i-…","terminateAfter":"2m"}: EC2 Spot Instance Interruption
//	                                         Warning; with terminateAfter, AWS then terminates the instance
//	POST /_awssim/rebalance-recommendation   {"instanceId":"i-…"}: EC2 Instance Rebalance Recommendation
//	POST /_awssim/scheduled-change           {"instanceId":"i-…","eventTypeCode":"AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"}:
//	                                         AWS Health Event (scheduledChange)
//	POST /_awssim/state-change               {"instanceId":"i-…","state":"stopping"}: the instance changes state and
//	                                         EC2 Instance State-change Notification is sent
//	POST /_awssim/terminate                  {"instanceId":"i-…"}: AWS terminates the instance (Server.InternalError)
//	POST /_awssim/spot-price                 {"instanceType":"m5.large","zone":"us-east-1a","price":0.03}
//	GET  /_awssim/capacity-reservations      the capacity reservations (CapacityReservationInfo, by id)
//	POST /_awssim/capacity-reservations      add one (CapacityReservationSpec): {"instanceType":"m5.large",
//	                                         "availabilityZone":"us-east-1a","totalInstanceCount":2,
//	                                         "instanceMatchCriteria":"targeted","reservationType":"capacity-block",
//	                                         "endDate":"2026-12-01T12:00:00Z","tags":{"team":"ml"}}; optional
//	                                         availableInstanceCount, ownerId, state, startDate; answers {"id":"cr-…"}
//	POST /_awssim/capacity-reservation-state {"id":"cr-…","state":"cancelled"}: active, expired, cancelled,
//	                                         pending or failed, as EC2 would change it
//	GET  /_awssim/calls                      the API calls answered: [{time,service,action,errorCode}]
//	DELETE /_awssim/calls                    forget them
const adminPrefix = "/_awssim/"

// InstanceInfo is an instance as the admin API and Instances report it.
type InstanceInfo struct {
	ID             string            `json:"id"`
	InstanceType   string            `json:"instanceType"`
	Zone           string            `json:"zone"`
	CapacityType   string            `json:"capacityType"`
	State          string            `json:"state"`
	PrivateIP      string            `json:"privateIp"`
	PrivateDNSName string            `json:"privateDnsName"`
	ProviderID     string            `json:"providerID"`
	ImageID        string            `json:"imageId"`
	LaunchTime     time.Time         `json:"launchTime"`
	Tags           map[string]string `json:"tags"`
	// CapacityReservationID is the reservation the instance was launched into (it holds a slot
	// until it shuts down); CapacityType is then "reserved" when it was launched with capacity-reservations-only
	// (as Karpenter counts it), else on-demand.
	CapacityReservationID string `json:"capacityReservationId,omitempty"`
}

// QueueInfo summarizes an SQS queue.
type QueueInfo struct {
	Name     string `json:"name"`
	URL      string `json:"url"`
	Arn      string `json:"arn"`
	Visible  int    `json:"visible"`
	InFlight int    `json:"inFlight"`
	Delayed  int    `json:"delayed"`
	// Waiting is the number of ReceiveMessage calls currently blocked in a long poll.
	Waiting int `json:"waiting"`
}

// StateInfo is what GET /_awssim/state returns.
type StateInfo struct {
	AccountID        string         `json:"accountId"`
	Region           string         `json:"region"`
	ClusterName      string         `json:"clusterName"`
	URL              string         `json:"url"`
	Instances        []InstanceInfo `json:"instances"`
	Queues           []QueueInfo    `json:"queues"`
	Rules            []string       `json:"rules"`
	EventsDelivered  int            `json:"eventsDelivered"`
	DeliveryFailures int            `json:"deliveryFailures"`
	// CapacityReservations are the ODCRs and Capacity Blocks, by id.
	CapacityReservations []CapacityReservationInfo `json:"capacityReservations"`
}

func (s *Server) info(in *instance) InstanceInfo {
	tags := map[string]string{}
	for _, t := range in.tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	info := InstanceInfo{ID: in.id, InstanceType: in.spec.Name, Zone: in.zone.name, CapacityType: in.capacityType, State: string(in.state),
		PrivateIP: in.privateIP, PrivateDNSName: in.dnsName, ProviderID: providerID(in), ImageID: aws.ToString(in.image.ImageId),
		LaunchTime: in.launchTime, Tags: tags}
	if in.reservation != nil {
		info.CapacityReservationID = in.reservation.id
	}
	if in.reserved() {
		info.CapacityType = "reserved"
	}
	return info
}

func providerID(in *instance) string { return fmt.Sprintf("aws:///%s/%s", in.zone.name, in.id) }

// Instances lists every instance the account knows (terminated ones for an hour), in launch order.
func (s *Server) Instances() []InstanceInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []InstanceInfo
	for _, id := range s.st.order {
		if in := s.st.instances[id]; in != nil {
			out = append(out, s.info(in))
		}
	}
	return out
}

// State returns a summary of the account.
func (s *Server) State() StateInfo {
	insts := s.Instances()
	crs := s.CapacityReservations()
	s.mu.Lock()
	defer s.mu.Unlock()
	st := StateInfo{AccountID: s.opts.AccountID, Region: s.opts.Region, ClusterName: s.opts.ClusterName, URL: s.url, Instances: insts,
		EventsDelivered: s.st.delivered, DeliveryFailures: s.st.deliveryFailures, Rules: sortedKeys(s.st.rules), Queues: []QueueInfo{},
		CapacityReservations: crs}
	now := s.now()
	for _, n := range sortedKeys(s.st.queues) {
		q := s.st.queues[n]
		v, f, d := q.counts(now)
		st.Queues = append(st.Queues, QueueInfo{Name: q.name, URL: q.url, Arn: q.arn, Visible: v, InFlight: f, Delayed: d, Waiting: q.waiting})
	}
	if st.Instances == nil {
		st.Instances = []InstanceInfo{}
	}
	return st
}

func (s *Server) instanceForEvent(id string) (*instance, error) {
	in := s.st.instances[id]
	if in == nil {
		return nil, fmt.Errorf("instance %s does not exist", id)
	}
	return in, nil
}

// InterruptSpot sends an EC2 Spot Instance Interruption Warning for a spot instance; when
// terminateAfter > 0, AWS terminates the instance that long afterwards (two minutes on EC2).
func (s *Server) InterruptSpot(instanceID string, terminateAfter time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.instanceForEvent(instanceID)
	if err != nil {
		return err
	}
	if in.capacityType != "spot" {
		return fmt.Errorf("instance %s is %s, not spot", instanceID, in.capacityType)
	}
	now := s.now()
	d, _ := json.Marshal(map[string]string{"instance-id": in.id, "instance-action": "terminate"})
	s.st.emit("aws.ec2", "EC2 Spot Instance Interruption Warning", []string{s.instanceArn(in.id)}, d, now)
	if terminateAfter > 0 {
		in.interruptAt = now.Add(terminateAfter)
	}
	s.logf("spot interruption warning for %s", in.id)
	return nil
}

// RebalanceRecommendation sends an EC2 Instance Rebalance Recommendation.
func (s *Server) RebalanceRecommendation(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.instanceForEvent(instanceID)
	if err != nil {
		return err
	}
	d, _ := json.Marshal(map[string]string{"instance-id": in.id})
	s.st.emit("aws.ec2", "EC2 Instance Rebalance Recommendation", []string{s.instanceArn(in.id)}, d, s.now())
	return nil
}

// ScheduledChange sends an AWS Health Event of category scheduledChange for an instance
// (eventTypeCode defaults to AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED).
func (s *Server) ScheduledChange(instanceID, eventTypeCode string) error {
	if eventTypeCode == "" {
		eventTypeCode = "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED"
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.instanceForEvent(instanceID)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	arn := fmt.Sprintf("arn:aws:health:%s::event/EC2/%s/%s_%s", s.opts.Region, eventTypeCode, eventTypeCode, s.st.ids.uuid("health"))
	d, _ := json.Marshal(map[string]any{
		"eventArn": arn, "service": "EC2", "eventTypeCode": eventTypeCode, "eventTypeCategory": "scheduledChange",
		"startTime": now.Add(14 * 24 * time.Hour).Format(time.RFC1123), "endTime": now.Add(15 * 24 * time.Hour).Format(time.RFC1123),
		"eventDescription": []map[string]string{{"language": "en_US",
			"latestDescription": fmt.Sprintf("EC2 has detected degradation of the underlying hardware hosting your Amazon EC2 instance %s.", in.id)}},
		"affectedEntities": []map[string]string{{"entityValue": in.id}},
	})
	s.st.emit("aws.health", "AWS Health Event", []string{in.id}, d, now)
	return nil
}

// ChangeState moves an instance to a state (pending, running, stopping, stopped, shutting-down,
// terminated) as AWS would on its own, sending the state-change notification.
func (s *Server) ChangeState(instanceID, state string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.instanceForEvent(instanceID)
	if err != nil {
		return err
	}
	now := s.now()
	st := ec2types.InstanceStateName(state)
	if _, ok := stateCodes[st]; !ok {
		return fmt.Errorf("unknown instance state %q", state)
	}
	if st == ec2types.InstanceStateNameShuttingDown || st == ec2types.InstanceStateNameTerminated {
		s.beginTermination(in, now, &ec2types.StateReason{Code: aws.String("Server.InternalError"),
			Message: aws.String("Server.InternalError: Internal error on launch")}, "Service initiated")
		if st == ec2types.InstanceStateNameTerminated {
			in.terminateAt = now
			s.st.advanceInstances(now)
		}
	} else {
		in.state = st
		s.st.emitStateChange(in, now)
	}
	s.notify()
	return nil
}

// TerminateByAWS terminates an instance the way AWS does on its own (hardware failure).
func (s *Server) TerminateByAWS(instanceID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, err := s.instanceForEvent(instanceID)
	if err != nil {
		return err
	}
	s.beginTermination(in, s.now(), &ec2types.StateReason{Code: aws.String("Server.InternalError"),
		Message: aws.String("Server.InternalError: Internal error on launch")}, "Service initiated")
	s.notify()
	return nil
}

// SetSubnetFreeAddresses sets the available IPv4 address count of the zone's subnets, as if
// other workloads had taken the rest: launches beyond it fail with
// InsufficientFreeAddressesInSubnet. It returns the subnets' ids.
func (s *Server) SetSubnetFreeAddresses(zone string, n int32) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, sn := range s.st.subnets {
		if aws.ToString(sn.AvailabilityZone) == zone {
			sn.AvailableIpAddressCount = aws.Int32(n)
			ids = append(ids, aws.ToString(sn.SubnetId))
		}
	}
	return ids
}

// SetSpotPrice overrides the spot price of a type in a zone ("" = every zone).
func (s *Server) SetSpotPrice(instanceType, zone string, price float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.spotPrices[[2]string{instanceType, zone}] = price
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func adminError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// serveReservationAdmin serves GET|POST capacity-reservations and POST capacity-reservation-state.
func (s *Server) serveReservationAdmin(w http.ResponseWriter, r *http.Request, path string, decode func(any) bool) {
	if path == "capacity-reservations" && r.Method == http.MethodGet {
		writeJSON(w, 200, s.CapacityReservations())
		return
	}
	if r.Method != http.MethodPost {
		adminError(w, http.StatusMethodNotAllowed, fmt.Errorf("use POST"))
		return
	}
	if path == "capacity-reservations" {
		var spec CapacityReservationSpec
		if !decode(&spec) {
			return
		}
		id, err := s.AddCapacityReservation(spec)
		if err != nil {
			adminError(w, 400, err)
			return
		}
		writeJSON(w, 200, map[string]string{"id": id})
		return
	}
	var req struct {
		ID    string `json:"id"`
		State string `json:"state"`
	}
	if !decode(&req) {
		return
	}
	if err := s.SetCapacityReservationState(req.ID, req.State); err != nil {
		status := 400
		if errors.Is(err, errUnknownReservation) {
			status = 404
		}
		adminError(w, status, err)
		return
	}
	writeJSON(w, 200, map[string]string{"status": "ok"})
}

type adminInstanceRequest struct {
	InstanceID     string   `json:"instanceId"`
	TerminateAfter Duration `json:"terminateAfter"`
	EventTypeCode  string   `json:"eventTypeCode"`
	State          string   `json:"state"`
}

func (s *Server) serveAdmin(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, adminPrefix)
	decode := func(v any) bool {
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			adminError(w, 400, fmt.Errorf("bad request body: %w", err))
			return false
		}
		return true
	}
	post := func() bool {
		if r.Method != http.MethodPost {
			adminError(w, http.StatusMethodNotAllowed, fmt.Errorf("use POST"))
			return false
		}
		return true
	}
	switch path {
	case "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "awssim admin API: GET state, GET|PUT faults, POST spot-interruption, rebalance-recommendation, scheduled-change, state-change, terminate, spot-price, GET|POST capacity-reservations, POST capacity-reservation-state, GET|DELETE calls")
	case "state":
		writeJSON(w, 200, s.State())
	case "faults":
		switch r.Method {
		case http.MethodGet:
			writeJSON(w, 200, s.Faults())
		case http.MethodPut, http.MethodPost:
			var f Faults
			if !decode(&f) {
				return
			}
			s.SetFaults(f)
			writeJSON(w, 200, f)
		default:
			adminError(w, http.StatusMethodNotAllowed, fmt.Errorf("use GET or PUT"))
		}
	case "spot-interruption", "rebalance-recommendation", "scheduled-change", "state-change", "terminate":
		if !post() {
			return
		}
		var req adminInstanceRequest
		if !decode(&req) {
			return
		}
		var err error
		switch path {
		case "spot-interruption":
			err = s.InterruptSpot(req.InstanceID, req.TerminateAfter.Duration)
		case "rebalance-recommendation":
			err = s.RebalanceRecommendation(req.InstanceID)
		case "scheduled-change":
			err = s.ScheduledChange(req.InstanceID, req.EventTypeCode)
		case "state-change":
			err = s.ChangeState(req.InstanceID, req.State)
		case "terminate":
			err = s.TerminateByAWS(req.InstanceID)
		}
		if err != nil {
			adminError(w, 404, err)
			return
		}
		writeJSON(w, 200, map[string]string{"status": "ok"})
	case "spot-price":
		if !post() {
			return
		}
		var req struct {
			InstanceType string  `json:"instanceType"`
			Zone         string  `json:"zone"`
			Price        float64 `json:"price"`
		}
		if !decode(&req) {
			return
		}
		s.SetSpotPrice(req.InstanceType, req.Zone, req.Price)
		writeJSON(w, 200, map[string]string{"status": "ok"})
	case "capacity-reservations", "capacity-reservation-state":
		s.serveReservationAdmin(w, r, path, decode)
	case "calls":
		switch r.Method {
		case http.MethodDelete:
			s.ResetCalls()
			writeJSON(w, 200, map[string]string{"status": "ok"})
		default:
			type callJSON struct {
				Time      time.Time `json:"time"`
				Service   string    `json:"service"`
				Action    string    `json:"action"`
				ErrorCode string    `json:"errorCode,omitempty"`
			}
			out := []callJSON{}
			for _, c := range s.Calls() {
				out = append(out, callJSON{c.Time, c.Service, c.Action, c.ErrorCode})
			}
			writeJSON(w, 200, out)
		}
	default:
		adminError(w, 404, fmt.Errorf("no admin endpoint %q", path))
	}
}
