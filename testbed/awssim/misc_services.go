package awssim

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/karpool/karpool/autoscaler/catalog"
)

// ---- STS ----

func (s *Server) stsService() *service {
	sv := &service{signingName: "sts", proto: protoQuery, xmlns: "https://sts.amazonaws.com/doc/2011-06-15/",
		version: "2011-06-15", reqTable: stsRequest, respTable: stsResponse}
	sv.register(op("GetCallerIdentity", s.stsGetCallerIdentity))
	return sv
}

func (s *Server) stsGetCallerIdentity(rc *reqCtx, in *sts.GetCallerIdentityInput) (any, error) {
	return &sts.GetCallerIdentityOutput{
		Account: aws.String(s.opts.AccountID),
		Arn:     aws.String(fmt.Sprintf("arn:aws:iam::%s:user/awssim", s.opts.AccountID)),
		UserId:  aws.String("AIDAAWSSIMUSER0000001"),
	}, nil
}

// ---- SSM ----

func (s *Server) ssmService() *service {
	sv := &service{signingName: "ssm", proto: protoJSON11, target: "AmazonSSM", regional: true}
	sv.register(op("GetParameter", s.ssmGetParameter), op("GetParameters", s.ssmGetParameters))
	return sv
}

func (s *Server) ssmParameter(name string) (ssmtypes.Parameter, bool) {
	p, ok := s.st.params[name]
	if !ok {
		return ssmtypes.Parameter{}, false
	}
	arnName := strings.TrimPrefix(name, "/")
	return ssmtypes.Parameter{Name: aws.String(p.name), Type: ssmtypes.ParameterTypeString, Value: aws.String(p.value),
		Version: p.version, LastModifiedDate: aws.Time(p.modified), DataType: aws.String("text"),
		ARN: aws.String(fmt.Sprintf("arn:aws:ssm:%s::parameter/%s", s.opts.Region, arnName))}, true
}

func (s *Server) ssmGetParameter(rc *reqCtx, in *ssm.GetParameterInput) (any, error) {
	name := aws.ToString(in.Name)
	if name == "" {
		return nil, apiErr(400, "ValidationException", "1 validation error detected: Value null at 'name' failed to satisfy constraint: Member must not be null")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.ssmParameter(name)
	if !ok {
		return nil, &apiError{Status: 400, Code: "ParameterNotFound", Message: ""}
	}
	return &ssm.GetParameterOutput{Parameter: &p}, nil
}

func (s *Server) ssmGetParameters(rc *reqCtx, in *ssm.GetParametersInput) (any, error) {
	if len(in.Names) == 0 || len(in.Names) > 10 {
		return nil, apiErr(400, "ValidationException", "1 validation error detected: Value at 'names' failed to satisfy constraint: Member must have length between 1 and 10")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &ssm.GetParametersOutput{Parameters: []ssmtypes.Parameter{}, InvalidParameters: []string{}}
	for _, n := range in.Names {
		if p, ok := s.ssmParameter(n); ok {
			out.Parameters = append(out.Parameters, p)
		} else {
			out.InvalidParameters = append(out.InvalidParameters, n)
		}
	}
	return out, nil
}

// ---- Pricing ----

func (s *Server) pricingService() *service {
	sv := &service{signingName: "pricing", proto: protoJSON11, target: "AWSPriceListService"}
	sv.register(op("GetProducts", s.pricingGetProducts))
	return sv
}

// regionNames are the Price List "location" values.
var regionNames = map[string]string{
	"us-east-1": "US East (N. Virginia)", "us-east-2": "US East (Ohio)", "us-west-1": "US West (N. California)",
	"us-west-2": "US West (Oregon)", "ap-northeast-2": "Asia Pacific (Seoul)", "eu-west-1": "EU (Ireland)",
	"eu-central-1": "EU (Frankfurt)", "ap-northeast-1": "Asia Pacific (Tokyo)",
}

// skuOf is a stable 16-character SKU for a product.
func skuOf(region, typ string) string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	h := spotDepth(7, region, typ)
	b := make([]byte, 16)
	for i := range b {
		b[i] = alphabet[h%32]
		h = h/32 ^ (h * 1099511628211)
	}
	return string(b)
}

type priceProduct struct {
	attrs map[string]string
	doc   string
}

// priceProducts renders a region's on-demand Linux shared-tenancy products as Price List JSON.
// Accelerated types also get a Capacity Block product (marketoption CapacityBlock) at another
// price, as AWS lists them: a reader that does not filter on marketoption reads a wrong
// on-demand price.
func priceProducts(cat *catalog.Catalog) []priceProduct {
	region := cat.Region()
	var out []priceProduct
	for _, sp := range cat.Specs() {
		if !cat.Offered(sp.Name) || sp.OnDemandPrice <= 0 {
			continue
		}
		mem := strconv.FormatFloat(float64(sp.MemoryMiB)/1024, 'f', -1, 64) + " GiB"
		attrs := map[string]string{
			"servicecode": "AmazonEC2", "servicename": "Amazon Elastic Compute Cloud", "instanceType": sp.Name,
			"instanceFamily": "General purpose", "vcpu": strconv.FormatInt(sp.VCPU, 10), "memory": mem,
			"regionCode": region, "location": regionNames[region], "locationType": "AWS Region",
			"operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
			"licenseModel": "No License required", "marketoption": "OnDemand", "operation": "RunInstances",
			"usagetype": "BoxUsage:" + sp.Name, "currentGeneration": "Yes", "processorArchitecture": "64-bit",
			"networkPerformance": networkPerformance(sp.NetworkBandwidthMbps), "storage": "EBS only",
			"gpuMemory": "NA", "availabilityzone": "NA",
		}
		if region != "us-east-1" {
			attrs["usagetype"] = strings.ToUpper(regionAbbrev(region)[:4]) + "-BoxUsage:" + sp.Name
		}
		if sp.GPUs > 0 {
			attrs["gpu"] = strconv.FormatInt(sp.GPUs, 10)
		}
		if sp.LocalNVMeGB > 0 {
			attrs["storage"] = fmt.Sprintf("1 x %d NVMe SSD", sp.LocalNVMeGB)
		}
		out = append(out, priceProductOf(skuOf(region, sp.Name), attrs, sp.OnDemandPrice, "On Demand Linux "+sp.Name+" Instance Hour"))
		if sp.GPUs > 0 {
			cb := maps.Clone(attrs)
			cb["marketoption"], cb["usagetype"] = "CapacityBlock", "CapacityBlock:"+sp.Name
			out = append(out, priceProductOf(skuOf(region, sp.Name+"/capacity-block"), cb, sp.OnDemandPrice*0.6, "Capacity Block Linux "+sp.Name+" Instance Hour"))
		}
	}
	return out
}

// priceProductOf is one Price List product with one hourly on-demand term.
func priceProductOf(sku string, attrs map[string]string, usd float64, what string) priceProduct {
	price := strconv.FormatFloat(usd, 'f', 10, 64)
	term := sku + ".JRTCKXETXF"
	rate := term + ".6YS6EN2CT7"
	doc := map[string]any{
		"product":     map[string]any{"productFamily": "Compute Instance", "attributes": attrs, "sku": sku},
		"serviceCode": "AmazonEC2",
		"terms": map[string]any{"OnDemand": map[string]any{term: map[string]any{
			"priceDimensions": map[string]any{rate: map[string]any{
				"unit": "Hrs", "endRange": "Inf", "beginRange": "0", "appliesTo": []string{}, "rateCode": rate,
				"description":  fmt.Sprintf("$%s per %s", strconv.FormatFloat(usd, 'f', -1, 64), what),
				"pricePerUnit": map[string]string{"USD": price},
			}},
			"sku": sku, "effectiveDate": "2026-11-01T00:00:00Z", "offerTermCode": "JRTCKXETXF", "termAttributes": map[string]any{},
		}}},
		"version": "20261101000000", "publicationDate": "2026-11-01T00:00:00Z",
	}
	b, _ := json.Marshal(doc)
	a := map[string]string{"serviceCode": "AmazonEC2", "productFamily": "Compute Instance", "sku": sku}
	maps.Copy(a, attrs)
	return priceProduct{attrs: a, doc: string(b)}
}

func pricingFilterMatch(f pricingtypes.Filter, attrs map[string]string) bool {
	field := aws.ToString(f.Field)
	var have string
	found := false
	for k, v := range attrs {
		if strings.EqualFold(k, field) {
			have, found = v, true
		}
	}
	want := aws.ToString(f.Value)
	switch f.Type {
	case pricingtypes.FilterTypeTermMatch, pricingtypes.FilterTypeEquals, "":
		return found && strings.EqualFold(have, want)
	case pricingtypes.FilterTypeContains:
		return found && strings.Contains(strings.ToLower(have), strings.ToLower(want))
	case pricingtypes.FilterTypeAnyOf:
		for _, w := range strings.Split(want, ",") {
			if found && strings.EqualFold(have, strings.TrimSpace(w)) {
				return true
			}
		}
		return false
	case pricingtypes.FilterTypeNoneOf:
		for _, w := range strings.Split(want, ",") {
			if found && strings.EqualFold(have, strings.TrimSpace(w)) {
				return false
			}
		}
		return true
	}
	return false
}

func (s *Server) pricingGetProducts(rc *reqCtx, in *pricing.GetProductsInput) (any, error) {
	if aws.ToString(in.ServiceCode) == "" {
		return nil, apiErr(400, "InvalidParameterException", "Input parameters ServiceCode is invalid")
	}
	if in.MaxResults != nil && (*in.MaxResults < 1 || *in.MaxResults > 100) {
		return nil, apiErr(400, "InvalidParameterException", "Input parameters MaxResults is invalid")
	}
	if fv := aws.ToString(in.FormatVersion); fv != "" && fv != "aws_v1" {
		return nil, apiErr(400, "InvalidParameterException", "Input parameters FormatVersion is invalid")
	}
	out := &pricing.GetProductsOutput{FormatVersion: aws.String("aws_v1"), PriceList: []string{}}
	if aws.ToString(in.ServiceCode) != "AmazonEC2" {
		return out, nil
	}
	regions := []string{s.opts.Region}
	for _, f := range in.Filters {
		if strings.EqualFold(aws.ToString(f.Field), "regionCode") && (f.Type == pricingtypes.FilterTypeTermMatch || f.Type == pricingtypes.FilterTypeEquals) {
			regions = []string{aws.ToString(f.Value)}
		}
	}
	var matched []priceProduct
	for _, r := range regions {
		cat := s.catalog
		if r != s.catalog.Region() {
			c, err := catalog.Load(r)
			if err != nil {
				continue
			}
			cat = c
		}
		for _, p := range priceProducts(cat) {
			ok := true
			for _, f := range in.Filters {
				if !pricingFilterMatch(f, p.attrs) {
					ok = false
					break
				}
			}
			if ok {
				matched = append(matched, p)
			}
		}
	}
	// In SKU order, which says nothing about the type or the market: like AWS's order, a
	// reader cannot count on the on-demand product coming last.
	sort.Slice(matched, func(i, j int) bool { return matched[i].attrs["sku"] < matched[j].attrs["sku"] })
	docs := make([]string, len(matched))
	for i, p := range matched {
		docs[i] = p.doc
	}
	max := int32(100)
	if in.MaxResults != nil {
		max = *in.MaxResults
	}
	items, next, err := page(docs, &max, in.NextToken, 100)
	if err != nil {
		return nil, apiErr(400, "InvalidNextTokenException", "The nextToken provided is invalid")
	}
	out.PriceList = append(out.PriceList, items...)
	out.NextToken = next
	return out, nil
}

// ---- EKS ----

type accessEntry struct {
	ekstypes.AccessEntry
}

func (s *Server) eksService() *service {
	sv := &service{signingName: "eks", proto: protoRestJSON, regional: true}
	sv.register(
		op("DescribeCluster", s.eksDescribeCluster),
		op("CreateAccessEntry", s.eksCreateAccessEntry),
		op("DescribeAccessEntry", s.eksDescribeAccessEntry),
		op("DeleteAccessEntry", s.eksDeleteAccessEntry),
		op("ListAccessEntries", s.eksListAccessEntries),
	)
	sv.routes = []route{
		{"GET", []string{"clusters", "{name}"}, "DescribeCluster"},
		{"POST", []string{"clusters", "{clusterName}", "access-entries"}, "CreateAccessEntry"},
		{"GET", []string{"clusters", "{clusterName}", "access-entries"}, "ListAccessEntries"},
		{"GET", []string{"clusters", "{clusterName}", "access-entries", "{principalArn}"}, "DescribeAccessEntry"},
		{"DELETE", []string{"clusters", "{clusterName}", "access-entries", "{principalArn}"}, "DeleteAccessEntry"},
	}
	return sv
}

func (s *Server) eksNoCluster(name string) error {
	return &apiError{Status: 404, Code: "ResourceNotFoundException", Message: fmt.Sprintf("No cluster found for name: %s.", name),
		Fields: map[string]any{"clusterName": name}}
}

func (s *Server) clusterEndpoint() string {
	if s.opts.ClusterEndpoint != "" {
		return s.opts.ClusterEndpoint
	}
	return fmt.Sprintf("https://%s.gr7.%s.eks.amazonaws.com", strings.ToUpper(shortHash(s.opts.ClusterName)+shortHash(s.opts.AccountID)), s.opts.Region)
}

func (s *Server) eksDescribeCluster(rc *reqCtx, in *eks.DescribeClusterInput) (any, error) {
	name := rc.path["name"]
	if name != s.opts.ClusterName {
		return nil, s.eksNoCluster(name)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var subnets []string
	for _, sn := range s.st.subnets {
		subnets = append(subnets, aws.ToString(sn.SubnetId))
	}
	ca := s.opts.ClusterCA
	if len(ca) == 0 {
		ca = []byte("-----BEGIN CERTIFICATE-----\nMIIBsimulatedCAawssim\n-----END CERTIFICATE-----\n")
	}
	sg := aws.ToString(s.st.sgs[0].GroupId)
	c := &ekstypes.Cluster{
		Name: aws.String(name), Arn: aws.String(fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", s.opts.Region, s.opts.AccountID, name)),
		CreatedAt: aws.Time(s.st.clusterCreated), Version: aws.String(s.opts.KubernetesVersion), Endpoint: aws.String(s.clusterEndpoint()),
		RoleArn:              aws.String(fmt.Sprintf("arn:aws:iam::%s:role/%s-cluster", s.opts.AccountID, name)),
		Status:               ekstypes.ClusterStatusActive,
		PlatformVersion:      aws.String("eks.1"),
		CertificateAuthority: &ekstypes.Certificate{Data: aws.String(base64.StdEncoding.EncodeToString(ca))},
		ResourcesVpcConfig: &ekstypes.VpcConfigResponse{SubnetIds: subnets, SecurityGroupIds: []string{}, ClusterSecurityGroupId: aws.String(sg),
			VpcId: s.st.vpc.VpcId, EndpointPublicAccess: true, EndpointPrivateAccess: true, PublicAccessCidrs: []string{"0.0.0.0/0"}},
		KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigResponse{ServiceIpv4Cidr: aws.String("10.96.0.0/24"), IpFamily: ekstypes.IpFamilyIpv4},
		Identity: &ekstypes.Identity{Oidc: &ekstypes.OIDC{Issuer: aws.String(fmt.Sprintf("https://oidc.eks.%s.amazonaws.com/id/%s", s.opts.Region,
			strings.ToUpper(shortHash(name)+shortHash(s.opts.AccountID)+shortHash(s.opts.Region)+shortHash("oidc"))))}},
		AccessConfig: &ekstypes.AccessConfigResponse{AuthenticationMode: ekstypes.AuthenticationModeApiAndConfigMap,
			BootstrapClusterCreatorAdminPermissions: aws.Bool(true)},
		Tags: map[string]string{},
	}
	return &eks.DescribeClusterOutput{Cluster: c}, nil
}

func (s *Server) eksCreateAccessEntry(rc *reqCtx, in *eks.CreateAccessEntryInput) (any, error) {
	cluster := rc.path["clusterName"]
	if cluster != s.opts.ClusterName {
		return nil, s.eksNoCluster(cluster)
	}
	principal := aws.ToString(in.PrincipalArn)
	if principal == "" {
		return nil, &apiError{Status: 400, Code: "InvalidParameterException", Message: "principalArn is required", Fields: map[string]any{"clusterName": cluster}}
	}
	typ := aws.ToString(in.Type)
	if typ == "" {
		typ = "STANDARD"
	}
	switch typ {
	case "STANDARD", "EC2_LINUX", "EC2_WINDOWS", "FARGATE_LINUX", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX":
	default:
		return nil, &apiError{Status: 400, Code: "InvalidParameterException", Message: fmt.Sprintf("The type %s is not valid.", typ), Fields: map[string]any{"clusterName": cluster}}
	}
	if typ != "STANDARD" && (len(in.KubernetesGroups) > 0 || in.Username != nil) {
		return nil, &apiError{Status: 400, Code: "InvalidParameterException",
			Message: fmt.Sprintf("The kubernetesGroups and username parameters can't be specified for an access entry of type %s.", typ), Fields: map[string]any{"clusterName": cluster}}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	roleName, isRole := strings.CutPrefix(principal, fmt.Sprintf("arn:aws:iam::%s:role/", s.opts.AccountID))
	if isRole {
		if i := strings.LastIndex(roleName, "/"); i >= 0 {
			roleName = roleName[i+1:]
		}
		if r := s.st.iam.roles[roleName]; r == nil || r.arn != principal {
			return nil, &apiError{Status: 400, Code: "InvalidParameterException", Message: "The specified principalArn is invalid: invalid principal",
				Fields: map[string]any{"clusterName": cluster}}
		}
	} else if !strings.HasPrefix(principal, "arn:aws:iam::") {
		return nil, &apiError{Status: 400, Code: "InvalidParameterException", Message: "The specified principalArn is invalid: invalid principal",
			Fields: map[string]any{"clusterName": cluster}}
	}
	if _, ok := s.st.accessEntries[principal]; ok {
		return nil, &apiError{Status: 409, Code: "ResourceInUseException", Message: fmt.Sprintf("The specified access entry resource is already in use on this cluster."),
			Fields: map[string]any{"clusterName": cluster}}
	}
	username := aws.ToString(in.Username)
	groups := in.KubernetesGroups
	if username == "" {
		switch typ {
		case "EC2_LINUX", "EC2_WINDOWS":
			username = "system:node:{{EC2PrivateDNSName}}"
		case "STANDARD":
			username = principal
			if isRole {
				username = fmt.Sprintf("arn:aws:sts::%s:assumed-role/%s/{{SessionName}}", s.opts.AccountID, roleName)
			}
		default:
			username = "system:node:{{SessionName}}"
		}
	}
	if groups == nil {
		groups = []string{}
	}
	now := rc.now.UTC().Truncate(time.Millisecond)
	kind := "role"
	if !isRole {
		kind = "user"
	}
	e := &accessEntry{ekstypes.AccessEntry{
		ClusterName: aws.String(cluster), PrincipalArn: aws.String(principal), KubernetesGroups: groups,
		AccessEntryArn: aws.String(fmt.Sprintf("arn:aws:eks:%s:%s:access-entry/%s/%s/%s/%s/%s", s.opts.Region, s.opts.AccountID, cluster, kind,
			s.opts.AccountID, roleName, s.st.ids.uuid("access-entry"))),
		CreatedAt: aws.Time(now), ModifiedAt: aws.Time(now), Tags: in.Tags, Username: aws.String(username), Type: aws.String(typ),
	}}
	if e.Tags == nil {
		e.Tags = map[string]string{}
	}
	s.st.accessEntries[principal] = e
	return &eks.CreateAccessEntryOutput{AccessEntry: ptrTo(e.AccessEntry)}, nil
}

func (s *Server) eksEntry(rc *reqCtx) (*accessEntry, error) {
	cluster := rc.path["clusterName"]
	if cluster != s.opts.ClusterName {
		return nil, s.eksNoCluster(cluster)
	}
	e := s.st.accessEntries[rc.path["principalArn"]]
	if e == nil {
		return nil, &apiError{Status: 404, Code: "ResourceNotFoundException",
			Message: fmt.Sprintf("The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'."),
			Fields:  map[string]any{"clusterName": cluster}}
	}
	return e, nil
}

func (s *Server) eksDescribeAccessEntry(rc *reqCtx, in *eks.DescribeAccessEntryInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.eksEntry(rc)
	if err != nil {
		return nil, err
	}
	return &eks.DescribeAccessEntryOutput{AccessEntry: ptrTo(e.AccessEntry)}, nil
}

func (s *Server) eksDeleteAccessEntry(rc *reqCtx, in *eks.DeleteAccessEntryInput) (any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, err := s.eksEntry(rc)
	if err != nil {
		return nil, err
	}
	delete(s.st.accessEntries, aws.ToString(e.PrincipalArn))
	return &eks.DeleteAccessEntryOutput{}, nil
}

func (s *Server) eksListAccessEntries(rc *reqCtx, in *eks.ListAccessEntriesInput) (any, error) {
	cluster := rc.path["clusterName"]
	if cluster != s.opts.ClusterName {
		return nil, s.eksNoCluster(cluster)
	}
	q := rc.r.URL.Query()
	var maxResults *int32
	if v := q.Get("maxResults"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return nil, &apiError{Status: 400, Code: "InvalidParameterException", Message: "maxResults must be between 1 and 100"}
		}
		maxResults = aws.Int32(int32(n))
	}
	var next *string
	if v := q.Get("nextToken"); v != "" {
		next = aws.String(v)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	all := sortedKeys(s.st.accessEntries)
	items, token, err := page(all, maxResults, next, 100)
	if err != nil {
		return nil, &apiError{Status: 400, Code: "InvalidParameterException", Message: "The nextToken is invalid"}
	}
	if items == nil {
		items = []string{}
	}
	return &eks.ListAccessEntriesOutput{AccessEntries: items, NextToken: token}, nil
}
