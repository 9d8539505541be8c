package awssim

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

type rule struct {
	name, arn   string
	pattern     string
	parsed      map[string]any
	schedule    string
	state       ebtypes.RuleState
	description *string
	roleArn     *string
	targets     []ebtypes.Target
	tags        []ebtypes.Tag
}

// eventEnvelope is the JSON EventBridge delivers to targets.
type eventEnvelope struct {
	Version    string          `json:"version"`
	ID         string          `json:"id"`
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Account    string          `json:"account"`
	Time       string          `json:"time"`
	Region     string          `json:"region"`
	Resources  []string        `json:"resources"`
	Detail     json.RawMessage `json:"detail"`
}

// EventBridge's principal as seen by SQS.
const eventsSenderID = "AIDAIEVENTBRIDGESIM01"

func (s *Server) eventsService() *service {
	sv := &service{signingName: "events", proto: protoJSON11, target: "AWSEvents", regional: true}
	sv.register(
		op("PutRule", s.ebPutRule), op("DescribeRule", s.ebDescribeRule), op("DeleteRule", s.ebDeleteRule),
		op("ListRules", s.ebListRules), op("PutTargets", s.ebPutTargets), op("ListTargetsByRule", s.ebListTargetsByRule),
		op("RemoveTargets", s.ebRemoveTargets), op("PutEvents", s.ebPutEvents),
		op("TagResource", s.ebTagResource), op("ListTagsForResource", s.ebListTagsForResource),
	)
	return sv
}

var ruleNameRE = regexp.MustCompile(`^[.\-_A-Za-z0-9]{1,64}$`)

func checkBus(bus *string) error {
	b := aws.ToString(bus)
	if b == "" || b == "default" || strings.HasSuffix(b, ":event-bus/default") {
		return nil
	}
	return apiErr(400, "ResourceNotFoundException", "Event bus %s does not exist.", b)
}

func noSuchRule(name string) error {
	return apiErr(400, "ResourceNotFoundException", "Rule %s does not exist on EventBus default.", name)
}

func validatePolicyJSON(v string) error {
	var m map[string]any
	if err := json.Unmarshal([]byte(v), &m); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	return nil
}

func (s *Server) ebPutRule(rc *reqCtx, in *eventbridge.PutRuleInput) (any, error) {
	name := aws.ToString(in.Name)
	if !ruleNameRE.MatchString(name) {
		return nil, apiErr(400, "ValidationException", "1 validation error detected: Value '%s' at 'name' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+", name)
	}
	if err := checkBus(in.EventBusName); err != nil {
		return nil, err
	}
	if in.EventPattern == nil && in.ScheduleExpression == nil {
		return nil, apiErr(400, "ValidationException", "Parameter(s) EventPattern or ScheduleExpression must be specified.")
	}
	var parsed map[string]any
	if in.EventPattern != nil {
		var err error
		parsed, err = parsePattern(*in.EventPattern)
		if err != nil {
			return nil, apiErr(400, "InvalidEventPatternException", "Event pattern is not valid. Reason: %v", err)
		}
	}
	state := in.State
	if state == "" {
		state = ebtypes.RuleStateEnabled
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.rules[name]
	if r == nil {
		r = &rule{name: name, arn: fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", s.opts.Region, s.opts.AccountID, name)}
		s.st.rules[name] = r
	}
	r.pattern, r.parsed, r.schedule, r.state = aws.ToString(in.EventPattern), parsed, aws.ToString(in.ScheduleExpression), state
	r.description, r.roleArn = in.Description, in.RoleArn
	if len(in.Tags) > 0 {
		r.tags = in.Tags
	}
	return &eventbridge.PutRuleOutput{RuleArn: aws.String(r.arn)}, nil
}

func (s *Server) ebDescribeRule(rc *reqCtx, in *eventbridge.DescribeRuleInput) (any, error) {
	if err := checkBus(in.EventBusName); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.rules[aws.ToString(in.Name)]
	if r == nil {
		return nil, noSuchRule(aws.ToString(in.Name))
	}
	return &eventbridge.DescribeRuleOutput{Name: aws.String(r.name), Arn: aws.String(r.arn), EventPattern: nilIfEmpty(r.pattern),
		ScheduleExpression: nilIfEmpty(r.schedule), State: r.state, Description: r.description, RoleArn: r.roleArn,
		EventBusName: aws.String("default"), CreatedBy: aws.String(s.opts.AccountID)}, nil
}

func (s *Server) ebListRules(rc *reqCtx, in *eventbridge.ListRulesInput) (any, error) {
	if err := checkBus(in.EventBusName); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []ebtypes.Rule
	for _, n := range sortedKeys(s.st.rules) {
		if p := aws.ToString(in.NamePrefix); p != "" && !strings.HasPrefix(n, p) {
			continue
		}
		r := s.st.rules[n]
		all = append(all, ebtypes.Rule{Name: aws.String(r.name), Arn: aws.String(r.arn), EventPattern: nilIfEmpty(r.pattern),
			ScheduleExpression: nilIfEmpty(r.schedule), State: r.state, Description: r.description, EventBusName: aws.String("default")})
	}
	items, next, err := page(all, in.Limit, in.NextToken, 100)
	if err != nil {
		return nil, apiErr(400, "ValidationException", "Invalid NextToken")
	}
	if items == nil {
		items = []ebtypes.Rule{}
	}
	return &eventbridge.ListRulesOutput{Rules: items, NextToken: next}, nil
}

// ruleByARN finds a rule of the default bus by its ARN. Call with s.mu.
func (s *Server) ruleByARN(arn *string) (*rule, error) {
	a := aws.ToString(arn)
	name := a[strings.LastIndex(a, "/")+1:]
	if r := s.st.rules[name]; r != nil && r.arn == a {
		return r, nil
	}
	return nil, apiErr(400, "ResourceNotFoundException", "Rule %s does not exist on EventBus default.", name)
}

func (s *Server) ebTagResource(rc *reqCtx, in *eventbridge.TagResourceInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.ruleByARN(in.ResourceARN)
	if err != nil {
		return nil, err
	}
	for _, t := range in.Tags {
		i := slices.IndexFunc(r.tags, func(e ebtypes.Tag) bool { return aws.ToString(e.Key) == aws.ToString(t.Key) })
		if i < 0 {
			r.tags = append(r.tags, t)
		} else {
			r.tags[i] = t
		}
	}
	return &eventbridge.TagResourceOutput{}, nil
}

func (s *Server) ebListTagsForResource(rc *reqCtx, in *eventbridge.ListTagsForResourceInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.ruleByARN(in.ResourceARN)
	if err != nil {
		return nil, err
	}
	return &eventbridge.ListTagsForResourceOutput{Tags: slices.Clone(r.tags)}, nil
}

func (s *Server) ebDeleteRule(rc *reqCtx, in *eventbridge.DeleteRuleInput) (any, error) {
	if err := checkBus(in.EventBusName); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.rules[aws.ToString(in.Name)]
	if r == nil {
		return &eventbridge.DeleteRuleOutput{}, nil // DeleteRule is idempotent
	}
	if len(r.targets) > 0 {
		return nil, apiErr(400, "ValidationException", "Rule can't be deleted since it has targets.")
	}
	delete(s.st.rules, r.name)
	return &eventbridge.DeleteRuleOutput{}, nil
}

var targetIDRE = regexp.MustCompile(`^[.\-_A-Za-z0-9]{1,64}$`)

func (s *Server) ebPutTargets(rc *reqCtx, in *eventbridge.PutTargetsInput) (any, error) {
	if err := checkBus(in.EventBusName); err != nil {
		return nil, err
	}
	if len(in.Targets) == 0 || len(in.Targets) > 10 {
		return nil, apiErr(400, "ValidationException", "1 validation error detected: Value at 'targets' failed to satisfy constraint: Member must have length between 1 and 10")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.rules[aws.ToString(in.Rule)]
	if r == nil {
		return nil, noSuchRule(aws.ToString(in.Rule))
	}
	out := &eventbridge.PutTargetsOutput{FailedEntries: []ebtypes.PutTargetsResultEntry{}}
	for _, t := range in.Targets {
		id := aws.ToString(t.Id)
		if !targetIDRE.MatchString(id) {
			return nil, apiErr(400, "ValidationException", "1 validation error detected: Value '%s' at 'targets.1.member.id' failed to satisfy constraint: Member must satisfy regular expression pattern: [\\.\\-_A-Za-z0-9]+", id)
		}
		if !strings.HasPrefix(aws.ToString(t.Arn), "arn:") {
			out.FailedEntries = append(out.FailedEntries, ebtypes.PutTargetsResultEntry{TargetId: t.Id, ErrorCode: aws.String("ValidationException"),
				ErrorMessage: aws.String("Parameter " + aws.ToString(t.Arn) + " is not valid. Reason: Provided Arn is not in correct format.")})
			continue
		}
		replaced := false
		for i := range r.targets {
			if aws.ToString(r.targets[i].Id) == id {
				r.targets[i] = t
				replaced = true
			}
		}
		if !replaced {
			if len(r.targets) >= 5 {
				out.FailedEntries = append(out.FailedEntries, ebtypes.PutTargetsResultEntry{TargetId: t.Id, ErrorCode: aws.String("LimitExceededException"),
					ErrorMessage: aws.String("The requested resource exceeds the maximum number allowed.")})
				continue
			}
			r.targets = append(r.targets, t)
		}
	}
	sort.SliceStable(r.targets, func(i, j int) bool { return aws.ToString(r.targets[i].Id) < aws.ToString(r.targets[j].Id) })
	out.FailedEntryCount = int32(len(out.FailedEntries))
	return out, nil
}

func (s *Server) ebListTargetsByRule(rc *reqCtx, in *eventbridge.ListTargetsByRuleInput) (any, error) {
	if err := checkBus(in.EventBusName); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.rules[aws.ToString(in.Rule)]
	if r == nil {
		return nil, noSuchRule(aws.ToString(in.Rule))
	}
	items, next, err := page(append([]ebtypes.Target{}, r.targets...), in.Limit, in.NextToken, 100)
	if err != nil {
		return nil, apiErr(400, "ValidationException", "Invalid NextToken")
	}
	return &eventbridge.ListTargetsByRuleOutput{Targets: items, NextToken: next}, nil
}

func (s *Server) ebRemoveTargets(rc *reqCtx, in *eventbridge.RemoveTargetsInput) (any, error) {
	if err := checkBus(in.EventBusName); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.st.rules[aws.ToString(in.Rule)]
	if r == nil {
		return nil, noSuchRule(aws.ToString(in.Rule))
	}
	kept := r.targets[:0]
	for _, t := range r.targets {
		if !contains(in.Ids, aws.ToString(t.Id)) {
			kept = append(kept, t)
		}
	}
	r.targets = kept
	return &eventbridge.RemoveTargetsOutput{FailedEntries: []ebtypes.RemoveTargetsResultEntry{}}, nil
}

// ebPutEventsInput is PutEvents' input with Time as the epoch-seconds number the wire carries.
type ebPutEventsInput struct {
	Entries []struct {
		Source       *string
		DetailType   *string
		Detail       *string
		Resources    []string
		Time         *float64
		EventBusName *string
		TraceHeader  *string
	}
	EndpointId *string
}

func (s *Server) ebPutEvents(rc *reqCtx, in *ebPutEventsInput) (any, error) {
	if len(in.Entries) == 0 || len(in.Entries) > 10 {
		return nil, apiErr(400, "ValidationException", "1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length between 1 and 10")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &eventbridge.PutEventsOutput{}
	for _, e := range in.Entries {
		fail := func(code, msg string) {
			out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{ErrorCode: aws.String(code), ErrorMessage: aws.String(msg)})
			out.FailedEntryCount++
		}
		switch {
		case aws.ToString(e.Source) == "":
			fail("InvalidArgument", "Parameter Source is not valid. Reason: Source is a required argument.")
			continue
		case aws.ToString(e.DetailType) == "":
			fail("InvalidArgument", "Parameter DetailType is not valid. Reason: DetailType is a required argument.")
			continue
		case aws.ToString(e.Detail) == "":
			fail("InvalidArgument", "Parameter Detail is not valid. Reason: Detail is a required argument.")
			continue
		case strings.HasPrefix(aws.ToString(e.Source), "aws."):
			fail("NotAuthorizedForSourceException", "Not authorized for the source.")
			continue
		}
		if checkBus(e.EventBusName) != nil {
			fail("InvalidArgument", "Parameter EventBusName is not valid. Reason: event bus does not exist.")
			continue
		}
		var detail map[string]any
		if json.Unmarshal([]byte(*e.Detail), &detail) != nil {
			fail("MalformedDetail", "Detail is malformed.")
			continue
		}
		t := rc.now
		if e.Time != nil {
			sec, frac := math.Modf(*e.Time)
			t = time.Unix(int64(sec), int64(frac*1e9))
		}
		id := s.st.emit(*e.Source, *e.DetailType, e.Resources, json.RawMessage(*e.Detail), t)
		out.Entries = append(out.Entries, ebtypes.PutEventsResultEntry{EventId: aws.String(id)})
	}
	return out, nil
}

// emit publishes an event on the default bus and delivers it to the SQS targets of matching,
// enabled rules whose queue policy lets events.amazonaws.com send. Call with s.mu.
func (st *state) emit(source, detailType string, resources []string, detail json.RawMessage, t time.Time) string {
	s := st.s
	if resources == nil {
		resources = []string{}
	}
	env := eventEnvelope{Version: "0", ID: st.ids.uuid("event"), DetailType: detailType, Source: source, Account: s.opts.AccountID,
		Time: t.UTC().Format("2006-01-02T15:04:05Z"), Region: s.opts.Region, Resources: resources, Detail: detail}
	body, _ := json.Marshal(env)
	var doc map[string]any
	_ = json.Unmarshal(body, &doc)
	for _, n := range sortedKeys(st.rules) {
		r := st.rules[n]
		if r.state != ebtypes.RuleStateEnabled || r.parsed == nil || !matchPattern(r.parsed, doc) {
			continue
		}
		for _, tg := range r.targets {
			arn := aws.ToString(tg.Arn)
			q := st.queueByArn(arn)
			if q == nil {
				st.deliveryFailures++
				s.logf("event %s (%s) for rule %s: target %s is not an existing SQS queue", env.ID, detailType, r.name, arn)
				continue
			}
			if !queueAllowsEvents(q, r.arn, s.opts.AccountID) {
				st.deliveryFailures++
				s.logf("event %s (%s) for rule %s: queue %s policy does not allow events.amazonaws.com to send", env.ID, detailType, r.name, q.name)
				continue
			}
			msg := string(body)
			if tg.Input != nil {
				msg = *tg.Input
			} else if p := aws.ToString(tg.InputPath); p != "" && p != "$" {
				if v, ok := jsonPath(doc, p); ok {
					b, _ := json.Marshal(v)
					msg = string(b)
				}
			}
			st.enqueue(q, msg, nil, t, 0, eventsSenderID)
			st.delivered++
		}
	}
	return env.ID
}

func jsonPath(doc map[string]any, p string) (any, bool) {
	var cur any = doc
	for _, part := range strings.Split(strings.TrimPrefix(strings.TrimPrefix(p, "$"), "."), ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[part]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

func (st *state) queueByArn(arn string) *queue {
	for _, q := range st.queues {
		if q.arn == arn {
			return q
		}
	}
	return nil
}

// queueAllowsEvents evaluates the queue policy for sqs:SendMessage by events.amazonaws.com from
// ruleArn. Without a policy EventBridge cannot deliver. Conditions on aws:SourceArn and
// aws:SourceAccount are evaluated; aws:SecureTransport is true (EventBridge uses TLS); other
// condition keys are treated as satisfied.
func queueAllowsEvents(q *queue, ruleArn, account string) bool {
	pol := q.attrs["Policy"]
	if pol == "" {
		return false
	}
	var doc struct {
		Statement json.RawMessage
	}
	if json.Unmarshal([]byte(pol), &doc) != nil {
		return false
	}
	var stmts []map[string]any
	if json.Unmarshal(doc.Statement, &stmts) != nil {
		var one map[string]any
		if json.Unmarshal(doc.Statement, &one) != nil {
			return false
		}
		stmts = []map[string]any{one}
	}
	ctx := map[string]string{"aws:sourcearn": ruleArn, "aws:sourceaccount": account, "aws:securetransport": "true"}
	allowed := false
	for _, st := range stmts {
		if !principalMatches(st["Principal"]) || !actionMatches(st["Action"]) || !resourceMatches(st["Resource"], q.arn) || !conditionsHold(st["Condition"], ctx) {
			continue
		}
		switch st["Effect"] {
		case "Deny":
			return false
		case "Allow":
			allowed = true
		}
	}
	return allowed
}

func stringsOf(v any) []string {
	switch x := v.(type) {
	case string:
		return []string{x}
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

func principalMatches(p any) bool {
	if s, ok := p.(string); ok {
		return s == "*"
	}
	m, ok := p.(map[string]any)
	if !ok {
		return false
	}
	for _, v := range stringsOf(m["AWS"]) {
		if v == "*" {
			return true
		}
	}
	for _, v := range stringsOf(m["Service"]) {
		if v == "events.amazonaws.com" {
			return true
		}
	}
	return false
}

func actionMatches(a any) bool {
	for _, v := range stringsOf(a) {
		if wildcardMatch(strings.ToLower(v), "sqs:sendmessage") || v == "*" {
			return true
		}
	}
	return false
}

func resourceMatches(r any, arn string) bool {
	if r == nil {
		return true
	}
	for _, v := range stringsOf(r) {
		if wildcardMatch(v, arn) {
			return true
		}
	}
	return false
}

func conditionsHold(c any, ctx map[string]string) bool {
	m, ok := c.(map[string]any)
	if !ok {
		return true
	}
	for opName, kv := range m {
		keys, ok := kv.(map[string]any)
		if !ok {
			continue
		}
		for k, want := range keys {
			have, known := ctx[strings.ToLower(k)]
			if !known {
				continue
			}
			vals := stringsOf(want)
			if b, ok := want.(bool); ok {
				vals = []string{fmt.Sprint(b)}
			}
			match := false
			for _, w := range vals {
				switch strings.TrimSuffix(strings.TrimPrefix(opName, "ForAnyValue:"), "IfExists") {
				case "StringEquals", "ArnEquals", "Bool":
					match = match || strings.EqualFold(w, have) && (opName != "StringEquals" || w == have)
				case "StringLike", "ArnLike":
					match = match || wildcardMatch(w, have)
				case "StringNotEquals", "ArnNotEquals":
					match = match || w != have
				default:
					match = true
				}
			}
			if !match {
				return false
			}
		}
	}
	return true
}

// ---- event patterns ----

func parsePattern(p string) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(strings.NewReader(p))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("Filter is not an object")
	}
	if err := checkPattern(m); err != nil {
		return nil, err
	}
	return m, nil
}

func checkPattern(m map[string]any) error {
	if len(m) == 0 {
		return fmt.Errorf("Empty objects are not allowed")
	}
	for k, v := range m {
		switch x := v.(type) {
		case map[string]any:
			if err := checkPattern(x); err != nil {
				return err
			}
		case []any:
			if len(x) == 0 {
				return fmt.Errorf("Empty arrays are not allowed")
			}
			for _, e := range x {
				if f, ok := e.(map[string]any); ok {
					if len(f) != 1 {
						return fmt.Errorf("Only one key allowed in match expression")
					}
					for op := range f {
						switch op {
						case "prefix", "suffix", "anything-but", "numeric", "exists", "equals-ignore-case", "wildcard", "cidr":
						default:
							return fmt.Errorf("Unrecognized match type %s", op)
						}
					}
				}
			}
		default:
			return fmt.Errorf("Match value must be String, number, true, false, or null at %s", k)
		}
	}
	return nil
}

// matchPattern applies an EventBridge event pattern to an event document.
func matchPattern(pattern map[string]any, doc map[string]any) bool {
	for k, pv := range pattern {
		ev, present := doc[k]
		switch p := pv.(type) {
		case map[string]any:
			sub, ok := ev.(map[string]any)
			if !ok {
				// A nested pattern can still match when all its leaves test for absence.
				if !matchPattern(p, map[string]any{}) {
					return false
				}
				continue
			}
			if !matchPattern(p, sub) {
				return false
			}
		case []any:
			if !matchValues(p, ev, present) {
				return false
			}
		}
	}
	return true
}

func matchValues(want []any, ev any, present bool) bool {
	for _, w := range want {
		if f, ok := w.(map[string]any); ok {
			if matchFilter(f, ev, present) {
				return true
			}
			continue
		}
		if !present {
			continue
		}
		if arr, ok := ev.([]any); ok {
			for _, e := range arr {
				if literalEqual(w, e) {
					return true
				}
			}
			continue
		}
		if literalEqual(w, ev) {
			return true
		}
	}
	return false
}

func literalEqual(w, v any) bool {
	switch x := w.(type) {
	case nil:
		return v == nil
	case string:
		s, ok := v.(string)
		return ok && s == x
	case bool:
		b, ok := v.(bool)
		return ok && b == x
	case json.Number:
		f1, _ := x.Float64()
		switch n := v.(type) {
		case float64:
			return f1 == n
		case json.Number:
			f2, _ := n.Float64()
			return f1 == f2
		}
	}
	return false
}

func eachValue(ev any, fn func(any) bool) bool {
	if arr, ok := ev.([]any); ok {
		for _, e := range arr {
			if fn(e) {
				return true
			}
		}
		return false
	}
	return fn(ev)
}

func matchFilter(f map[string]any, ev any, present bool) bool {
	for op, arg := range f {
		switch op {
		case "exists":
			b, _ := arg.(bool)
			if arr, ok := ev.([]any); ok && len(arr) == 0 {
				present = false
			}
			if _, isObj := ev.(map[string]any); isObj {
				present = false // exists matches leaf values only
			}
			return present == b
		case "prefix", "suffix", "equals-ignore-case", "wildcard":
			if !present {
				return false
			}
			return eachValue(ev, func(v any) bool { return stringOp(op, arg, v) })
		case "anything-but":
			if !present {
				return false
			}
			return eachValue(ev, func(v any) bool { return !anythingButMatches(arg, v) })
		case "numeric":
			if !present {
				return false
			}
			return eachValue(ev, func(v any) bool { return numericMatch(arg, v) })
		}
	}
	return false
}

func stringOp(op string, arg, v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	switch a := arg.(type) {
	case string:
		switch op {
		case "prefix":
			return strings.HasPrefix(s, a)
		case "suffix":
			return strings.HasSuffix(s, a)
		case "equals-ignore-case":
			return strings.EqualFold(s, a)
		case "wildcard":
			return globMatch(a, s)
		}
	case map[string]any: // {"prefix": {"equals-ignore-case": "x"}}
		if inner, ok := a["equals-ignore-case"].(string); ok {
			switch op {
			case "prefix":
				return len(s) >= len(inner) && strings.EqualFold(s[:len(inner)], inner)
			case "suffix":
				return len(s) >= len(inner) && strings.EqualFold(s[len(s)-len(inner):], inner)
			}
		}
	}
	return false
}

// anythingButMatches reports whether v is one of the excluded values.
func anythingButMatches(arg, v any) bool {
	switch a := arg.(type) {
	case []any:
		for _, x := range a {
			if literalEqual(x, v) {
				return true
			}
		}
		return false
	case map[string]any:
		for op, inner := range a {
			switch op {
			case "prefix", "suffix", "equals-ignore-case", "wildcard":
				for _, x := range append(stringsAny(inner), nil) {
					if x != nil && stringOp(op, x, v) {
						return true
					}
				}
			}
		}
		return false
	default:
		return literalEqual(a, v)
	}
}

func stringsAny(v any) []any {
	if arr, ok := v.([]any); ok {
		return arr
	}
	return []any{v}
}

func numericMatch(arg, v any) bool {
	var n float64
	switch x := v.(type) {
	case float64:
		n = x
	case json.Number:
		n, _ = x.Float64()
	default:
		return false
	}
	ops, ok := arg.([]any)
	if !ok || len(ops)%2 != 0 {
		return false
	}
	for i := 0; i < len(ops); i += 2 {
		op, _ := ops[i].(string)
		var bound float64
		switch b := ops[i+1].(type) {
		case json.Number:
			bound, _ = b.Float64()
		case float64:
			bound = b
		default:
			return false
		}
		switch op {
		case "=":
			ok = n == bound
		case "<":
			ok = n < bound
		case "<=":
			ok = n <= bound
		case ">":
			ok = n > bound
		case ">=":
			ok = n >= bound
		default:
			return false
		}
		if !ok {
			return false
		}
	}
	return true
}

// ---- EC2 events ----

func (s *Server) instanceArn(id string) string {
	return fmt.Sprintf("arn:aws:ec2:%s:%s:instance/%s", s.opts.Region, s.opts.AccountID, id)
}

// emitStateChange sends "EC2 Instance State-change Notification". Call with s.mu.
func (st *state) emitStateChange(in *instance, now time.Time) {
	d, _ := json.Marshal(map[string]string{"instance-id": in.id, "state": string(in.state)})
	st.emit("aws.ec2", "EC2 Instance State-change Notification", []string{st.s.instanceArn(in.id)}, d, now)
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
