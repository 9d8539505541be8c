package awssim

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

type sqsMessage struct {
	id           string
	body         string
	md5          string
	attrs        map[string]sqstypes.MessageAttributeValue
	attrsMD5     string
	sent         time.Time
	visibleAt    time.Time
	receiveCount int
	firstReceive time.Time
	receipt      string
	senderID     string
}

type queue struct {
	name, url, arn    string
	attrs             map[string]string
	tags              map[string]string
	created, modified time.Time
	msgs              []*sqsMessage
	receives          uint64
	// waiting counts ReceiveMessage calls blocked in a long poll; the admin state shows it so a
	// test can tell that a poll is in progress before it sends what should wake it.
	waiting int
}

var sqsDefaults = map[string]string{
	"DelaySeconds": "0", "MaximumMessageSize": "1048576", "MessageRetentionPeriod": "345600",
	"ReceiveMessageWaitTimeSeconds": "0", "VisibilityTimeout": "30", "SqsManagedSseEnabled": "true",
}

// sqsSettable are the attributes CreateQueue and SetQueueAttributes accept, with their ranges.
var sqsSettable = map[string][2]int{
	"DelaySeconds": {0, 900}, "MaximumMessageSize": {1024, 1048576}, "MessageRetentionPeriod": {60, 1209600},
	"ReceiveMessageWaitTimeSeconds": {0, 20}, "VisibilityTimeout": {0, 43200}, "KmsDataKeyReusePeriodSeconds": {60, 86400},
	"Policy": {}, "RedrivePolicy": {}, "RedriveAllowPolicy": {}, "KmsMasterKeyId": {}, "SqsManagedSseEnabled": {},
}

var sqsReadOnly = []string{"QueueArn", "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
	"ApproximateNumberOfMessagesDelayed", "CreatedTimestamp", "LastModifiedTimestamp"}

func (s *Server) sqsService() *service {
	sv := &service{signingName: "sqs", proto: protoJSON10, target: "AmazonSQS", jsonNS: "com.amazonaws.sqs", regional: true}
	sv.register(
		op("CreateQueue", s.sqsCreateQueue), op("GetQueueUrl", s.sqsGetQueueUrl), op("GetQueueAttributes", s.sqsGetQueueAttributes),
		op("SetQueueAttributes", s.sqsSetQueueAttributes), op("DeleteQueue", s.sqsDeleteQueue), op("ListQueues", s.sqsListQueues),
		op("PurgeQueue", s.sqsPurgeQueue), op("SendMessage", s.sqsSendMessage), op("ReceiveMessage", s.sqsReceiveMessage),
		op("DeleteMessage", s.sqsDeleteMessage), op("ChangeMessageVisibility", s.sqsChangeMessageVisibility),
		op("TagQueue", s.sqsTagQueue), op("ListQueueTags", s.sqsListQueueTags),
	)
	return sv
}

func sqsErr(status int, code, queryCode, msg string) *apiError {
	return &apiError{Status: status, Code: code, QueryCode: queryCode, Message: msg}
}

func noSuchQueue() error {
	return sqsErr(400, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", "The specified queue does not exist.")
}

func sqsInvalidValue(name, reason string) error {
	return sqsErr(400, "InvalidAttributeValue", "InvalidAttributeValue", fmt.Sprintf("Invalid value for the parameter %s. Reason: %s", name, reason))
}

var queueNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,80}$`)

func (s *Server) queueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", s.opts.Region, s.opts.AccountID, name)
}

// queueByURL resolves a queue URL: AWS's own form, the simulator's URL, or any URL whose path
// ends in /ACCOUNT/NAME. Call with s.mu.
func (s *Server) queueByURL(u *string) (*queue, error) {
	v := aws.ToString(u)
	if v == "" {
		return nil, sqsErr(400, "MissingParameter", "MissingParameter", "The request must contain the parameter QueueUrl.")
	}
	parts := strings.Split(strings.TrimRight(v, "/"), "/")
	if len(parts) < 2 || parts[len(parts)-2] != s.opts.AccountID {
		return nil, noSuchQueue()
	}
	q := s.st.queues[parts[len(parts)-1]]
	if q == nil {
		return nil, noSuchQueue()
	}
	return q, nil
}

func validateQueueAttrs(attrs map[string]string) error {
	for k, v := range attrs {
		r, ok := sqsSettable[k]
		if !ok {
			if k == "FifoQueue" || k == "ContentBasedDeduplication" || k == "DeduplicationScope" || k == "FifoThroughputLimit" {
				return sqsInvalidValue(k, "Only FIFO queues support this attribute; the simulator simulates standard queues.")
			}
			return sqsErr(400, "InvalidAttributeName", "InvalidAttributeName", fmt.Sprintf("Unknown Attribute %s.", k))
		}
		switch k {
		case "Policy", "RedrivePolicy", "RedriveAllowPolicy":
			if v != "" {
				if err := validatePolicyJSON(v); err != nil {
					return sqsInvalidValue(k, err.Error())
				}
			}
		case "SqsManagedSseEnabled":
			if v != "true" && v != "false" {
				return sqsInvalidValue(k, "must be true or false")
			}
		case "KmsMasterKeyId":
		default:
			n, err := strconv.Atoi(v)
			if err != nil || n < r[0] || n > r[1] {
				return sqsInvalidValue(k, fmt.Sprintf("Must be an integer value between %d and %d.", r[0], r[1]))
			}
		}
	}
	return nil
}

func (s *Server) sqsCreateQueue(rc *reqCtx, in *sqs.CreateQueueInput) (any, error) {
	name := aws.ToString(in.QueueName)
	if strings.HasSuffix(name, ".fifo") {
		return nil, sqsInvalidValue("QueueName", "The simulator simulates standard queues only.")
	}
	if !queueNameRE.MatchString(name) {
		return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	if err := validateQueueAttrs(in.Attributes); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q := s.st.queues[name]; q != nil {
		for k, v := range in.Attributes {
			if q.attrs[k] != v {
				return nil, sqsErr(400, "QueueNameExists", "QueueAlreadyExists", fmt.Sprintf("A queue already exists with the same name and a different value for attribute %s", k))
			}
		}
		return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
	}
	if t, ok := s.st.deletedQueues[name]; ok && rc.now.Sub(t) < 60*time.Second {
		return nil, sqsErr(400, "QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently",
			"You must wait 60 seconds after deleting a queue before you can create another with the same name.")
	}
	now := rc.now.UTC().Truncate(time.Second)
	q := &queue{name: name, url: s.queueURL(name), arn: fmt.Sprintf("arn:aws:sqs:%s:%s:%s", s.opts.Region, s.opts.AccountID, name),
		attrs: map[string]string{}, tags: map[string]string{}, created: now, modified: now}
	for k, v := range sqsDefaults {
		q.attrs[k] = v
	}
	for k, v := range in.Attributes {
		q.attrs[k] = v
	}
	for k, v := range in.Tags {
		q.tags[k] = v
	}
	s.st.queues[name] = q
	return &sqs.CreateQueueOutput{QueueUrl: aws.String(q.url)}, nil
}

func (s *Server) sqsGetQueueUrl(rc *reqCtx, in *sqs.GetQueueUrlInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o := aws.ToString(in.QueueOwnerAWSAccountId); o != "" && o != s.opts.AccountID {
		return nil, noSuchQueue()
	}
	q := s.st.queues[aws.ToString(in.QueueName)]
	if q == nil {
		return nil, noSuchQueue()
	}
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String(q.url)}, nil
}

func (q *queue) counts(now time.Time) (visible, inflight, delayed int) {
	for _, m := range q.msgs {
		switch {
		case m.receiveCount == 0 && now.Before(m.visibleAt):
			delayed++
		case now.Before(m.visibleAt):
			inflight++
		default:
			visible++
		}
	}
	return
}

func (s *Server) sqsGetQueueAttributes(rc *reqCtx, in *sqs.GetQueueAttributesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	visible, inflight, delayed := q.counts(rc.now)
	all := map[string]string{
		"QueueArn": q.arn, "ApproximateNumberOfMessages": strconv.Itoa(visible),
		"ApproximateNumberOfMessagesNotVisible": strconv.Itoa(inflight), "ApproximateNumberOfMessagesDelayed": strconv.Itoa(delayed),
		"CreatedTimestamp": strconv.FormatInt(q.created.Unix(), 10), "LastModifiedTimestamp": strconv.FormatInt(q.modified.Unix(), 10),
	}
	for k, v := range q.attrs {
		all[k] = v
	}
	out := &sqs.GetQueueAttributesOutput{Attributes: map[string]string{}}
	for _, n := range in.AttributeNames {
		name := string(n)
		if name == "All" {
			out.Attributes = all
			break
		}
		v, ok := all[name]
		if !ok {
			if _, settable := sqsSettable[name]; settable {
				continue // not set (e.g. Policy)
			}
			return nil, sqsErr(400, "InvalidAttributeName", "InvalidAttributeName", fmt.Sprintf("Unknown Attribute %s.", name))
		}
		out.Attributes[name] = v
	}
	if len(out.Attributes) == 0 {
		out.Attributes = nil
	}
	return out, nil
}

func (s *Server) sqsSetQueueAttributes(rc *reqCtx, in *sqs.SetQueueAttributesInput) (any, error) {
	if len(in.Attributes) == 0 {
		return nil, sqsErr(400, "MissingParameter", "MissingParameter", "The request must contain the parameter Attribute.Name.")
	}
	for k := range in.Attributes {
		if contains(sqsReadOnly, k) {
			return nil, sqsErr(400, "InvalidAttributeName", "InvalidAttributeName", fmt.Sprintf("Unknown Attribute %s.", k))
		}
	}
	if err := validateQueueAttrs(in.Attributes); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	for k, v := range in.Attributes {
		if v == "" && (k == "Policy" || k == "RedrivePolicy" || k == "RedriveAllowPolicy" || k == "KmsMasterKeyId") {
			delete(q.attrs, k)
			continue
		}
		q.attrs[k] = v
	}
	q.modified = rc.now.UTC().Truncate(time.Second)
	return &sqs.SetQueueAttributesOutput{}, nil
}

func (s *Server) sqsDeleteQueue(rc *reqCtx, in *sqs.DeleteQueueInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	delete(s.st.queues, q.name)
	s.st.deletedQueues[q.name] = rc.now
	s.notify()
	return &sqs.DeleteQueueOutput{}, nil
}

func (s *Server) sqsTagQueue(rc *reqCtx, in *sqs.TagQueueInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if len(q.tags)+len(in.Tags) > 50 {
		return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", "Too many tags added for queue: a queue has at most 50 tags.")
	}
	maps.Copy(q.tags, in.Tags)
	return &sqs.TagQueueOutput{}, nil
}

func (s *Server) sqsListQueueTags(rc *reqCtx, in *sqs.ListQueueTagsInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	return &sqs.ListQueueTagsOutput{Tags: maps.Clone(q.tags)}, nil
}

func (s *Server) sqsListQueues(rc *reqCtx, in *sqs.ListQueuesInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var urls []string
	for _, n := range sortedKeys(s.st.queues) {
		if p := aws.ToString(in.QueueNamePrefix); p != "" && !strings.HasPrefix(n, p) {
			continue
		}
		urls = append(urls, s.st.queues[n].url)
	}
	var max *int32
	if in.MaxResults != nil {
		max = in.MaxResults
	}
	def := 1000
	if max == nil {
		def = 1000
	}
	items, next, err := page(urls, max, in.NextToken, def)
	if err != nil {
		return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", "Invalid NextToken value.")
	}
	return &sqs.ListQueuesOutput{QueueUrls: items, NextToken: next}, nil
}

func (s *Server) sqsPurgeQueue(rc *reqCtx, in *sqs.PurgeQueueInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	q.msgs = nil
	return &sqs.PurgeQueueOutput{}, nil
}

func md5Hex(s string) string {
	sum := md5.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}

// md5OfAttributes is SQS's MD5 of message attributes: names sorted, each encoded as
// length-prefixed name, data type, transport type (1 string, 2 binary) and value.
func md5OfAttributes(attrs map[string]sqstypes.MessageAttributeValue) string {
	if len(attrs) == 0 {
		return ""
	}
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	h := md5.New()
	put := func(b []byte) {
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		h.Write(l[:])
		h.Write(b)
	}
	for _, n := range names {
		v := attrs[n]
		put([]byte(n))
		put([]byte(aws.ToString(v.DataType)))
		if v.StringValue != nil {
			h.Write([]byte{1})
			put([]byte(*v.StringValue))
		} else {
			h.Write([]byte{2})
			put(v.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

type sqsSendMessageInput struct {
	QueueUrl          *string
	MessageBody       *string
	DelaySeconds      *int32
	MessageAttributes map[string]sqstypes.MessageAttributeValue
}

// validMessageBody reports whether SQS accepts the characters of a body.
func validMessageBody(b string) bool {
	for _, r := range b {
		switch {
		case r == 0x9 || r == 0xA || r == 0xD:
		case r >= 0x20 && r <= 0xD7FF:
		case r >= 0xE000 && r <= 0xFFFD:
		case r >= 0x10000 && r <= 0x10FFFF:
		default:
			return false
		}
	}
	return true
}

func (s *Server) sqsSendMessage(rc *reqCtx, in *sqsSendMessageInput) (any, error) {
	body := aws.ToString(in.MessageBody)
	if body == "" {
		return nil, sqsErr(400, "MissingParameter", "MissingParameter", "The request must contain the parameter MessageBody.")
	}
	if !validMessageBody(body) {
		return nil, sqsErr(400, "InvalidMessageContents", "InvalidMessageContents", "Invalid characters found. Valid unicode characters are #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF")
	}
	for n, v := range in.MessageAttributes {
		if v.DataType == nil || (v.StringValue == nil && v.BinaryValue == nil) {
			return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf("The message attribute '%s' must contain a non-empty message attribute value.", n))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if max, _ := strconv.Atoi(q.attrs["MaximumMessageSize"]); len(body) > max {
		return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf("One or more parameters are invalid. Reason: Message must be shorter than %d bytes.", max))
	}
	delay, _ := strconv.Atoi(q.attrs["DelaySeconds"])
	if in.DelaySeconds != nil {
		if *in.DelaySeconds < 0 || *in.DelaySeconds > 900 {
			return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf("Value %d for parameter DelaySeconds is invalid. Reason: DelaySeconds must be >= 0 and <= 900.", *in.DelaySeconds))
		}
		delay = int(*in.DelaySeconds)
	}
	m := s.st.enqueue(q, body, in.MessageAttributes, rc.now, time.Duration(delay)*time.Second, "AIDAAWSSIMUSER0000001")
	out := &sqs.SendMessageOutput{MessageId: aws.String(m.id), MD5OfMessageBody: aws.String(m.md5)}
	if m.attrsMD5 != "" {
		out.MD5OfMessageAttributes = aws.String(m.attrsMD5)
	}
	return out, nil
}

// enqueue adds a message. Call with s.mu.
func (st *state) enqueue(q *queue, body string, attrs map[string]sqstypes.MessageAttributeValue, now time.Time, delay time.Duration, sender string) *sqsMessage {
	m := &sqsMessage{id: st.ids.uuid("sqs-message"), body: body, md5: md5Hex(body), attrs: attrs, attrsMD5: md5OfAttributes(attrs),
		sent: now, visibleAt: now.Add(delay), senderID: sender}
	q.msgs = append(q.msgs, m)
	st.s.notify()
	return m
}

type sqsReceiveMessageInput struct {
	QueueUrl                    *string
	AttributeNames              []string
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	MaxNumberOfMessages         *int32
	VisibilityTimeout           *int32
	WaitTimeSeconds             *int32
	ReceiveRequestAttemptId     *string
}

func (s *Server) sqsReceiveMessage(rc *reqCtx, in *sqsReceiveMessageInput) (any, error) {
	max := int32(1)
	if in.MaxNumberOfMessages != nil {
		max = *in.MaxNumberOfMessages
		if max < 1 || max > 10 {
			return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", max))
		}
	}
	if in.WaitTimeSeconds != nil && (*in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20) {
		return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds))
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > 43200) {
		return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *in.VisibilityTimeout))
	}
	s.mu.Lock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	wait, _ := strconv.Atoi(q.attrs["ReceiveMessageWaitTimeSeconds"])
	if in.WaitTimeSeconds != nil {
		wait = int(*in.WaitTimeSeconds)
	}
	deadline := rc.now.Add(time.Duration(wait) * time.Second)
	// The poll also ends after its wait in real time: Options.Clock may run slower than it.
	realDeadline := time.Now().Add(time.Duration(wait) * time.Second)
	for {
		now := s.now()
		// The queue may have been deleted while we waited.
		if s.st.queues[q.name] != q {
			s.mu.Unlock()
			return nil, noSuchQueue()
		}
		vis, _ := strconv.Atoi(q.attrs["VisibilityTimeout"])
		if in.VisibilityTimeout != nil {
			vis = int(*in.VisibilityTimeout)
		}
		var got []sqstypes.Message
		next := deadline
		for _, m := range q.msgs {
			if int32(len(got)) >= max {
				break
			}
			if now.Before(m.visibleAt) {
				if m.visibleAt.Before(next) {
					next = m.visibleAt
				}
				continue
			}
			got = append(got, s.st.receive(q, m, now, time.Duration(vis)*time.Second, in))
		}
		if len(got) > 0 {
			s.mu.Unlock()
			return &sqs.ReceiveMessageOutput{Messages: got}, nil
		}
		if !now.Before(deadline) || !time.Now().Before(realDeadline) {
			s.mu.Unlock()
			return &sqs.ReceiveMessageOutput{}, nil
		}
		ch := s.changed
		q.waiting++
		s.mu.Unlock()
		t := time.NewTimer(min(next.Sub(now), time.Until(realDeadline)) + 5*time.Millisecond)
		var cancelled error
		closed := false
		select {
		case <-ch:
		case <-t.C:
		case <-rc.ctx.Done():
			cancelled = rc.ctx.Err()
		case <-s.ctx.Done():
			closed = true
		}
		t.Stop()
		s.mu.Lock()
		q.waiting--
		if cancelled != nil {
			s.mu.Unlock()
			return nil, cancelled
		}
		if closed {
			s.mu.Unlock()
			return &sqs.ReceiveMessageOutput{}, nil
		}
	}
}

// receive hands a message out. Call with s.mu.
func (st *state) receive(q *queue, m *sqsMessage, now time.Time, vis time.Duration, in *sqsReceiveMessageInput) sqstypes.Message {
	m.receiveCount++
	if m.firstReceive.IsZero() {
		m.firstReceive = now
	}
	m.visibleAt = now.Add(vis)
	q.receives++
	m.receipt = base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("%s %s %s %d", st.s.opts.AccountID, q.name, m.id, q.receives)))
	out := sqstypes.Message{MessageId: aws.String(m.id), ReceiptHandle: aws.String(m.receipt), Body: aws.String(m.body), MD5OfBody: aws.String(m.md5)}
	sys := map[string]string{
		"SenderId": m.senderID, "SentTimestamp": strconv.FormatInt(m.sent.UnixMilli(), 10),
		"ApproximateReceiveCount":          strconv.Itoa(m.receiveCount),
		"ApproximateFirstReceiveTimestamp": strconv.FormatInt(m.firstReceive.UnixMilli(), 10),
	}
	wanted := append(append([]string{}, in.AttributeNames...), in.MessageSystemAttributeNames...)
	for _, n := range wanted {
		if n == "All" {
			out.Attributes = sys
			break
		}
		if v, ok := sys[n]; ok {
			if out.Attributes == nil {
				out.Attributes = map[string]string{}
			}
			out.Attributes[n] = v
		}
	}
	if len(m.attrs) > 0 && len(in.MessageAttributeNames) > 0 {
		sel := map[string]sqstypes.MessageAttributeValue{}
		for k, v := range m.attrs {
			for _, want := range in.MessageAttributeNames {
				if want == "All" || want == ".*" || want == k || (strings.HasSuffix(want, ".*") && strings.HasPrefix(k, strings.TrimSuffix(want, "*"))) {
					sel[k] = v
				}
			}
		}
		if len(sel) > 0 {
			out.MessageAttributes = sel
			out.MD5OfMessageAttributes = aws.String(md5OfAttributes(sel))
		}
	}
	return out
}

// messageByReceipt finds the message a receipt handle names. Call with s.mu.
func (s *Server) messageByReceipt(q *queue, handle string) (int, error) {
	b, err := base64.StdEncoding.DecodeString(handle)
	f := strings.Fields(string(b))
	if err != nil || len(f) != 4 || f[0] != s.opts.AccountID {
		return -1, sqsErr(400, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", fmt.Sprintf("The input receipt handle \"%s\" is not a valid receipt handle.", handle))
	}
	for i, m := range q.msgs {
		if m.id == f[2] {
			return i, nil
		}
	}
	return -1, nil
}

func (s *Server) sqsDeleteMessage(rc *reqCtx, in *sqs.DeleteMessageInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	i, err := s.messageByReceipt(q, aws.ToString(in.ReceiptHandle))
	if err != nil {
		return nil, err
	}
	if i >= 0 {
		q.msgs = append(q.msgs[:i], q.msgs[i+1:]...)
	}
	return &sqs.DeleteMessageOutput{}, nil
}

func (s *Server) sqsChangeMessageVisibility(rc *reqCtx, in *sqs.ChangeMessageVisibilityInput) (any, error) {
	if in.VisibilityTimeout < 0 || in.VisibilityTimeout > 43200 {
		return nil, sqsErr(400, "InvalidParameterValue", "InvalidParameterValue", fmt.Sprintf("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", in.VisibilityTimeout))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, err := s.queueByURL(in.QueueUrl)
	if err != nil {
		return nil, err
	}
	i, err := s.messageByReceipt(q, aws.ToString(in.ReceiptHandle))
	if err != nil {
		return nil, err
	}
	if i < 0 || q.msgs[i].receipt != aws.ToString(in.ReceiptHandle) || !rc.now.Before(q.msgs[i].visibleAt) {
		return nil, sqsErr(400, "MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", "Message does not exist or is not available for visibility timeout change.")
	}
	q.msgs[i].visibleAt = rc.now.Add(time.Duration(in.VisibilityTimeout) * time.Second)
	s.notify()
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// advanceQueues drops messages past retention and reports whether any in-flight message became
// visible again since the last tick. Call with s.mu.
func (st *state) advanceQueues(now time.Time) bool {
	changed := false
	for _, q := range st.queues {
		ret, _ := strconv.Atoi(q.attrs["MessageRetentionPeriod"])
		kept := q.msgs[:0]
		for _, m := range q.msgs {
			if now.Sub(m.sent) > time.Duration(ret)*time.Second {
				changed = true
				continue
			}
			if !now.Before(m.visibleAt) && now.Sub(m.visibleAt) < 150*time.Millisecond {
				changed = true
			}
			kept = append(kept, m)
		}
		q.msgs = kept
	}
	return changed
}
