package awssim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/aws/smithy-go"
)

// protocol is a wire protocol of the AWS APIs.
type protocol int

const (
	protoEC2Query protocol = iota // EC2: form POST, XML with requestId, <Response><Errors>
	protoQuery                    // IAM, STS: form POST, <XResponse><XResult>, <ErrorResponse>
	protoJSON10                   // SQS: X-Amz-Target, application/x-amz-json-1.0
	protoJSON11                   // EventBridge, SSM, Pricing: application/x-amz-json-1.1
	protoRestJSON                 // EKS: REST paths, JSON bodies, X-Amzn-ErrorType
)

// apiError is an AWS error response.
type apiError struct {
	Status  int
	Code    string
	Message string
	// Receiver marks server faults (query protocol <Type>Receiver</Type>); default Sender.
	Receiver bool
	// QueryCode is SQS's x-amzn-query-error code (awsQueryCompatible).
	QueryCode string
	// Fields are extra members of a JSON error body (e.g. EKS clusterName).
	Fields map[string]any
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func apiErr(status int, code, format string, args ...any) *apiError {
	return &apiError{Status: status, Code: code, Message: fmt.Sprintf(format, args...)}
}

// reqCtx is one API request being served.
type reqCtx struct {
	ctx       context.Context
	s         *Server
	r         *http.Request
	svc       *service
	body      []byte
	form      url.Values
	action    string
	path      map[string]string // restJson path labels
	requestID string
	accessKey string
	now       time.Time
}

// operation is one API action.
type operation struct {
	name     string
	newInput func() any
	call     func(rc *reqCtx, in any) (any, error)
}

// op registers a typed handler. In is the SDK input type (or a local struct for JSON inputs the
// SDK types cannot unmarshal); the handler returns an SDK output value.
func op[In any](name string, fn func(rc *reqCtx, in *In) (any, error)) *operation {
	return &operation{
		name:     name,
		newInput: func() any { return new(In) },
		call:     func(rc *reqCtx, in any) (any, error) { return fn(rc, in.(*In)) },
	}
}

// route maps a restJson1 method and path pattern ({label} segments) to an operation.
type route struct {
	method  string
	pattern []string
	op      string
}

type service struct {
	signingName string // SigV4 credential scope service, and the IAM action prefix
	proto       protocol
	xmlns       string // query protocols
	target      string // JSON protocols: X-Amz-Target prefix
	jsonNS      string // JSON error __type namespace
	version     string // query protocols: API version
	reqTable    wireTable
	respTable   wireTable
	ops         map[string]*operation
	routes      []route
	// regional services must be signed for the simulator's region.
	regional bool
}

func (s *Server) buildServices() map[string]*service {
	svcs := []*service{
		s.ec2Service(), s.iamService(), s.stsService(), s.sqsService(), s.eventsService(),
		s.ssmService(), s.pricingService(), s.eksService(),
	}
	m := map[string]*service{}
	for _, sv := range svcs {
		m[sv.signingName] = sv
	}
	return m
}

func (sv *service) register(ops ...*operation) {
	if sv.ops == nil {
		sv.ops = map[string]*operation{}
	}
	for _, o := range ops {
		sv.ops[o.name] = o
	}
}

// guessService picks the service of a request without a usable Authorization header, so the
// rejection has that service's error shape.
func (s *Server) guessService(r *http.Request, body []byte) *service {
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		for _, sv := range s.services {
			if sv.target != "" && strings.HasPrefix(t, sv.target+".") {
				return sv
			}
		}
		return s.services["sqs"]
	}
	if strings.HasPrefix(r.URL.Path, "/clusters") {
		return s.services["eks"]
	}
	form, _ := url.ParseQuery(string(body))
	switch form.Get("Version") {
	case "2010-05-08":
		return s.services["iam"]
	case "2011-06-15":
		return s.services["sts"]
	}
	return s.services["ec2"]
}

func (s *Server) newRequestID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.ids.uuid("req")
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, body []byte) {
	rc := &reqCtx{ctx: r.Context(), s: s, r: r, body: body, now: s.now()}
	rc.requestID = s.newRequestID()

	auth, authErr := parseAuthorization(r)
	if authErr == nil {
		rc.svc = s.services[auth.service]
		if rc.svc == nil {
			sv := s.guessService(r, body)
			rc.svc = sv
			s.writeError(w, rc, authError(sv.proto, "scope", fmt.Sprintf("Credential should be scoped to correct service: '%s'.", sv.signingName)))
			return
		}
	} else {
		rc.svc = s.guessService(r, body)
	}
	if len(body) > maxBody {
		s.writeError(w, rc, apiErr(413, "RequestEntityTooLarge", "Request body too large"))
		return
	}
	if authErr != nil {
		s.writeError(w, rc, authError(rc.svc.proto, authErr.kind, ""))
		return
	}
	rc.accessKey = auth.accessKey
	if e := s.checkSignature(r, body, auth, rc.svc); e != nil {
		s.writeError(w, rc, e)
		return
	}

	o, in, err := s.decodeRequest(rc)
	if err != nil {
		s.writeError(w, rc, asAPIError(rc.svc.proto, err))
		return
	}
	call := Call{Time: rc.now, Service: rc.svc.signingName, Action: o.name, AccessKeyID: rc.accessKey, Input: in, RequestID: rc.requestID}
	out, err := s.injectFaults(rc, o.name)
	if err == nil {
		out, err = o.call(rc, in)
	}
	if err != nil {
		ae := asAPIError(rc.svc.proto, err)
		call.ErrorCode = ae.Code
		s.recordCall(call)
		s.writeError(w, rc, ae)
		return
	}
	call.Output = out
	s.recordCall(call)
	if err := s.delayResponse(rc, o.name); err != nil {
		return // the client went away; the operation took effect all the same
	}
	s.writeOutput(w, rc, out)
}

func asAPIError(p protocol, err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return &apiError{Status: 500, Code: internalCode(p), Message: err.Error(), Receiver: true}
}

func internalCode(p protocol) string {
	switch p {
	case protoEC2Query:
		return "InternalError"
	case protoRestJSON:
		return "ServerException"
	}
	return "InternalFailure"
}

// decodeRequest finds the operation and decodes its input.
func (s *Server) decodeRequest(rc *reqCtx) (*operation, any, error) {
	sv := rc.svc
	switch sv.proto {
	case protoEC2Query, protoQuery:
		form, err := url.ParseQuery(string(rc.body))
		if err != nil {
			return nil, nil, apiErr(400, "MalformedQueryString", "The query string is malformed: %v", err)
		}
		for k, v := range rc.r.URL.Query() {
			if _, ok := form[k]; !ok {
				form[k] = v
			}
		}
		rc.form = form
		rc.action = form.Get("Action")
		if rc.action == "" {
			if sv.proto == protoEC2Query {
				return nil, nil, apiErr(400, "MissingAction", "The request must contain the parameter Action")
			}
			return nil, nil, apiErr(400, "MissingAction", "Missing Action")
		}
		o := sv.ops[rc.action]
		if o == nil {
			return nil, nil, apiErr(400, "InvalidAction", "The action %s is not valid for this web service.", rc.action)
		}
		in := o.newInput()
		if err := newQueryDecoder(form, sv.reqTable).decode(in); err != nil {
			var pe *queryParamError
			if errors.As(err, &pe) {
				if sv.proto == protoEC2Query {
					return nil, nil, apiErr(400, "InvalidParameterValue", "%s", pe.Error())
				}
				return nil, nil, apiErr(400, "ValidationError", "%s", pe.Error())
			}
			return nil, nil, err
		}
		return o, in, nil
	case protoJSON10, protoJSON11:
		target := rc.r.Header.Get("X-Amz-Target")
		name, ok := strings.CutPrefix(target, sv.target+".")
		if !ok {
			return nil, nil, apiErr(400, "UnknownOperationException", "")
		}
		rc.action = name
		o := sv.ops[name]
		if o == nil {
			return nil, nil, apiErr(400, "UnknownOperationException", "")
		}
		in := o.newInput()
		body := bytes.TrimSpace(rc.body)
		if len(body) > 0 {
			if err := json.Unmarshal(body, in); err != nil {
				return nil, nil, apiErr(400, "SerializationException", "Start of structure or map found where not expected: %v", err)
			}
		}
		return o, in, nil
	case protoRestJSON:
		segs := splitPath(rc.r.URL.EscapedPath())
		for _, rt := range sv.routes {
			if rt.method != rc.r.Method || len(rt.pattern) != len(segs) {
				continue
			}
			labels := map[string]string{}
			match := true
			for i, p := range rt.pattern {
				if strings.HasPrefix(p, "{") {
					v, err := url.PathUnescape(segs[i])
					if err != nil {
						match = false
						break
					}
					labels[strings.Trim(p, "{}")] = v
				} else if p != segs[i] {
					match = false
					break
				}
			}
			if !match {
				continue
			}
			rc.path = labels
			rc.action = rt.op
			o := sv.ops[rt.op]
			in := o.newInput()
			body := bytes.TrimSpace(rc.body)
			if len(body) > 0 {
				if err := json.Unmarshal(body, in); err != nil {
					return nil, nil, apiErr(400, "BadRequestException", "Could not parse request body into json: %v", err)
				}
			}
			setPathLabels(in, labels)
			return o, in, nil
		}
		return nil, nil, apiErr(404, "UnknownOperationException", "No operation matches %s %s", rc.r.Method, rc.r.URL.Path)
	}
	return nil, nil, fmt.Errorf("unknown protocol")
}

func splitPath(p string) []string {
	p = strings.Trim(p, "/")
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

func (s *Server) writeOutput(w http.ResponseWriter, rc *reqCtx, out any) {
	sv := rc.svc
	h := w.Header()
	switch sv.proto {
	case protoEC2Query:
		e := &xmlEncoder{table: sv.respTable}
		e.buf.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
		fmt.Fprintf(&e.buf, `<%sResponse xmlns="%s">`, rc.action, sv.xmlns)
		e.open("requestId")
		e.text(rc.requestID)
		e.close("requestId")
		e.structFields(reflectValue(out))
		e.close(rc.action + "Response")
		h.Set("Content-Type", "text/xml;charset=UTF-8")
		w.WriteHeader(200)
		w.Write(e.buf.Bytes())
	case protoQuery:
		e := &xmlEncoder{table: sv.respTable}
		fmt.Fprintf(&e.buf, `<%sResponse xmlns="%s">`, rc.action, sv.xmlns)
		if _, ok := sv.respTable[typeName(out)]; ok {
			e.open(rc.action + "Result")
			e.structFields(reflectValue(out))
			e.close(rc.action + "Result")
		}
		e.buf.WriteString("<ResponseMetadata><RequestId>" + rc.requestID + "</RequestId></ResponseMetadata>")
		e.close(rc.action + "Response")
		h.Set("Content-Type", "text/xml")
		h.Set("X-Amzn-Requestid", rc.requestID)
		w.WriteHeader(200)
		w.Write(e.buf.Bytes())
	case protoJSON10, protoJSON11, protoRestJSON:
		var b []byte
		if ser, ok := out.(smithy.Serializable); ok {
			b = marshalShape(ser, sv.proto == protoRestJSON)
		} else {
			b, _ = json.Marshal(out)
		}
		switch sv.proto {
		case protoJSON10:
			h.Set("Content-Type", "application/x-amz-json-1.0")
		case protoJSON11:
			h.Set("Content-Type", "application/x-amz-json-1.1")
		default:
			h.Set("Content-Type", "application/json")
		}
		h.Set("X-Amzn-Requestid", rc.requestID)
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(200)
		w.Write(b)
	}
}

func (s *Server) writeError(w http.ResponseWriter, rc *reqCtx, e *apiError) {
	status := e.Status
	if status == 0 {
		status = 400
	}
	h := w.Header()
	var buf bytes.Buffer
	switch rc.svc.proto {
	case protoEC2Query:
		buf.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
		buf.WriteString("<Response><Errors><Error><Code>")
		xmlText(&buf, e.Code)
		buf.WriteString("</Code><Message>")
		xmlText(&buf, e.Message)
		buf.WriteString("</Message></Error></Errors><RequestID>" + rc.requestID + "</RequestID></Response>")
		h.Set("Content-Type", "text/xml;charset=UTF-8")
	case protoQuery:
		typ := "Sender"
		if e.Receiver || status >= 500 {
			typ = "Receiver"
		}
		fmt.Fprintf(&buf, `<ErrorResponse xmlns="%s"><Error><Type>%s</Type><Code>`, rc.svc.xmlns, typ)
		xmlText(&buf, e.Code)
		buf.WriteString("</Code><Message>")
		xmlText(&buf, e.Message)
		buf.WriteString("</Message></Error><RequestId>" + rc.requestID + "</RequestId></ErrorResponse>")
		h.Set("Content-Type", "text/xml")
		h.Set("X-Amzn-Requestid", rc.requestID)
	case protoJSON10, protoJSON11:
		m := map[string]any{}
		for k, v := range e.Fields {
			m[k] = v
		}
		typ := e.Code
		if rc.svc.jsonNS != "" && !strings.Contains(typ, "#") {
			typ = rc.svc.jsonNS + "#" + typ
		}
		m["__type"] = typ
		m["message"] = e.Message
		b, _ := json.Marshal(m)
		buf.Write(b)
		if rc.svc.proto == protoJSON10 {
			h.Set("Content-Type", "application/x-amz-json-1.0")
		} else {
			h.Set("Content-Type", "application/x-amz-json-1.1")
		}
		if e.QueryCode != "" {
			fault := "Sender"
			if e.Receiver || status >= 500 {
				fault = "Receiver"
			}
			h.Set("X-Amzn-Query-Error", e.QueryCode+";"+fault)
		}
		h.Set("X-Amzn-Requestid", rc.requestID)
	case protoRestJSON:
		m := map[string]any{}
		for k, v := range e.Fields {
			m[k] = v
		}
		m["message"] = e.Message
		b, _ := json.Marshal(m)
		buf.Write(b)
		h.Set("Content-Type", "application/json")
		h.Set("X-Amzn-Errortype", e.Code)
		h.Set("X-Amzn-Requestid", rc.requestID)
	}
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

func xmlText(buf *bytes.Buffer, s string) {
	e := xmlEncoder{}
	e.text(s)
	buf.Write(e.buf.Bytes())
}
