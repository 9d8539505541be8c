package ensure

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/karpool/karpool/autoscaler/cloud/aws/awserr"
	"github.com/karpool/karpool/internal/iampolicy"
)

const (
	kindQueue = "SQS queue"
	kindRule  = "EventBridge rule"
)

// queueAttributes are the attributes karpool sets on the interruption queue.
func (e *ensurer) queueAttributes() map[string]string {
	q := e.r.Queue
	return map[string]string{
		"MessageRetentionPeriod": strconv.Itoa(q.RetentionSeconds),
		"SqsManagedSseEnabled":   strconv.FormatBool(q.ManagedSSE),
		"Policy":                 q.Policy.JSON(),
	}
}

func (e *ensurer) queue(ctx context.Context) error {
	want := e.r.Queue
	attrs := e.queueAttributes()
	got, err := e.c.SQS.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(want.Name)})
	if awserr.Code(err) == "AWS.SimpleQueueService.NonExistentQueue" || awserr.Code(err) == "QueueDoesNotExist" {
		if !e.change(Create, kindQueue, want.Name) {
			return nil
		}
		if _, err := e.c.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(want.Name), Attributes: attrs, Tags: want.Tags}); err != nil {
			return failed("creating SQS queue "+want.Name, err)
		}
		return nil
	}
	if err != nil {
		return failed("reading SQS queue "+want.Name, err)
	}
	have, err := e.c.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: got.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		return failed("reading the attributes of SQS queue "+want.Name, err)
	}
	set := map[string]string{}
	var diffs []string
	for _, k := range sortedKeys(attrs) {
		if k == "Policy" {
			doc, perr := iampolicy.Parse(have.Attributes[k])
			if perr == nil && iampolicy.Equal(doc, want.Policy) {
				continue
			}
			diffs = append(diffs, "Policy")
		} else if have.Attributes[k] != attrs[k] {
			diffs = append(diffs, fmt.Sprintf("%s: %s → %s", k, have.Attributes[k], attrs[k]))
		} else {
			continue
		}
		set[k] = attrs[k]
	}
	if len(set) == 0 {
		return nil
	}
	tags, err := e.c.SQS.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: got.QueueUrl})
	if err != nil {
		return failed("reading the tags of SQS queue "+want.Name, err)
	}
	if !e.owned(tags.Tags) {
		e.notOwned(kindQueue, want.Name, diffs)
		return nil
	}
	if !e.change(Update, kindQueue, want.Name, diffs...) {
		return nil
	}
	if _, err := e.c.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: got.QueueUrl, Attributes: set}); err != nil {
		return failed("updating SQS queue "+want.Name, err)
	}
	return nil
}

func (e *ensurer) rules(ctx context.Context) error {
	for _, want := range e.r.Rules {
		got, err := e.c.Events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(want.Name)})
		if awserr.Code(err) == "ResourceNotFoundException" {
			if !e.change(Create, kindRule, want.Name, "target "+want.TargetQueue) {
				continue
			}
			if err := e.putRule(ctx, want.Name, want.Pattern, want.Tags, want.TargetID, want.TargetQueue); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return failed("reading EventBridge rule "+want.Name, err)
		}
		targets, err := e.c.Events.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: aws.String(want.Name)})
		if err != nil {
			return failed("reading the targets of EventBridge rule "+want.Name, err)
		}
		var diffs []string
		if !sameJSON(aws.ToString(got.EventPattern), want.Pattern) {
			diffs = append(diffs, "event pattern: "+aws.ToString(got.EventPattern)+" → "+want.Pattern)
		}
		if got.State != ebtypes.RuleStateEnabled {
			diffs = append(diffs, "state: "+string(got.State)+" → ENABLED")
		}
		if len(targets.Targets) != 1 || aws.ToString(targets.Targets[0].Arn) != want.TargetQueue || aws.ToString(targets.Targets[0].Id) != want.TargetID {
			diffs = append(diffs, "targets → "+want.TargetQueue)
		}
		if len(diffs) == 0 {
			continue
		}
		owned, err := e.ruleOwned(ctx, aws.ToString(got.Arn))
		if err != nil {
			return err
		}
		if !owned {
			e.notOwned(kindRule, want.Name, diffs)
			continue
		}
		if !e.change(Update, kindRule, want.Name, diffs...) {
			continue
		}
		if err := e.removeTargets(ctx, want.Name, targets.Targets); err != nil {
			return err
		}
		if err := e.putRule(ctx, want.Name, want.Pattern, nil, want.TargetID, want.TargetQueue); err != nil {
			return err
		}
	}
	return nil
}

func (e *ensurer) putRule(ctx context.Context, name, pattern string, tags map[string]string, targetID, queue string) error {
	var ebTags []ebtypes.Tag
	for _, k := range sortedKeys(tags) {
		ebTags = append(ebTags, ebtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	if _, err := e.c.Events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventPattern: aws.String(pattern),
		State: ebtypes.RuleStateEnabled, Tags: ebTags}); err != nil {
		return failed("writing EventBridge rule "+name, err)
	}
	if _, err := e.c.Events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(name),
		Targets: []ebtypes.Target{{Id: aws.String(targetID), Arn: aws.String(queue)}}}); err != nil {
		return failed("pointing EventBridge rule "+name+" at the queue", err)
	}
	return nil
}

func (e *ensurer) removeTargets(ctx context.Context, rule string, targets []ebtypes.Target) error {
	if len(targets) == 0 {
		return nil
	}
	var ids []string
	for _, t := range targets {
		ids = append(ids, aws.ToString(t.Id))
	}
	if _, err := e.c.Events.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(rule), Ids: ids}); err != nil {
		return failed("removing the targets of EventBridge rule "+rule, err)
	}
	return nil
}

func (e *ensurer) ruleOwned(ctx context.Context, arn string) (bool, error) {
	out, err := e.c.Events.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: aws.String(arn)})
	if err != nil {
		return false, failed("reading the tags of "+arn, err)
	}
	tags := map[string]string{}
	for _, t := range out.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return e.owned(tags), nil
}

// pruneRules deletes the cluster's rules (named karpool-<cluster>-…) that left the desired state.
func (e *ensurer) pruneRules(ctx context.Context) error {
	want := map[string]bool{}
	for _, r := range e.r.Rules {
		want[r.Name] = true
	}
	prefix := "karpool-" + e.s.ClusterName + "-"
	if len(prefix) > 64 {
		prefix = prefix[:64]
	}
	var next *string
	for first := true; first || next != nil; first = false {
		page, err := e.c.Events.ListRules(ctx, &eventbridge.ListRulesInput{NamePrefix: aws.String(prefix), NextToken: next})
		if err != nil {
			return failed("listing EventBridge rules", err)
		}
		next = page.NextToken
		for _, r := range page.Rules {
			name := aws.ToString(r.Name)
			if want[name] || !strings.HasPrefix(name, prefix) {
				continue
			}
			owned, err := e.ruleOwned(ctx, aws.ToString(r.Arn))
			if err != nil {
				return err
			}
			if !owned || !e.change(Delete, kindRule, name) {
				continue
			}
			targets, err := e.c.Events.ListTargetsByRule(ctx, &eventbridge.ListTargetsByRuleInput{Rule: r.Name})
			if err != nil {
				return failed("reading the targets of EventBridge rule "+name, err)
			}
			if err := e.removeTargets(ctx, name, targets.Targets); err != nil {
				return err
			}
			if _, err := e.c.Events.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: r.Name}); err != nil {
				return failed("deleting EventBridge rule "+name, err)
			}
		}
	}
	return nil
}

// sameJSON compares two JSON texts by value.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}
