package awssim_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/karpool/karpool/testbed/awssim"
)

// TestConcurrentClients launches, describes, tags and terminates from many goroutines while
// long polls wait on a queue; every id is unique and every instance ends terminated.
func TestConcurrentClients(t *testing.T) {
	srv, cfg := newSim(t, awssim.Options{Logf: func(string, ...any) {}})
	ctx := testCtx(t, 2*time.Minute)
	c := ec2.NewFromConfig(cfg)
	profile := nodeRole(t, cfg)
	subnets, sg := discovered(t, c)
	lt := createLT(t, c, "concurrent", al2023AMI(t, cfg, "x86_64"), sg, profile)
	q := sqs.NewFromConfig(cfg)
	url := try(q.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String("concurrent")})).OK(t).QueueUrl

	var wg sync.WaitGroup
	ids := make(chan string, 200)
	errs := make(chan error, 200)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < 5; i++ {
				out, err := c.CreateFleet(ctx, fleetInput(lt.LaunchTemplateId, ec2types.DefaultTargetCapacityTypeOnDemand, 2, fleetOverrides(subnets, "m5.large", "c5.large")))
				if err != nil {
					errs <- err
					return
				}
				for _, g := range out.Instances {
					for _, id := range g.InstanceIds {
						ids <- id
						if _, err := c.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{id}, Tags: []ec2types.Tag{{Key: aws.String("w"), Value: aws.String(fmt.Sprint(w))}}}); err != nil {
							errs <- err
						}
					}
				}
				if _, err := c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{filter("tag:w", fmt.Sprint(w))}}); err != nil {
					errs <- err
				}
			}
		}(w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := q.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: url, WaitTimeSeconds: 1}); err != nil {
				errs <- err
			}
			if _, err := q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: url, MessageBody: aws.String("x")}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(ids)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	seen := map[string]bool{}
	var all []string
	for id := range ids {
		if seen[id] {
			t.Errorf("duplicate instance id %s", id)
		}
		seen[id] = true
		all = append(all, id)
	}
	if len(all) != 80 {
		t.Errorf("%d instances, want 80", len(all))
	}
	for i := 0; i < len(all); i += 50 {
		end := min(i+50, len(all))
		try(c.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: all[i:end]})).OK(t)
	}
	eventually(t, 10*time.Second, "every instance terminated", func() bool {
		for _, in := range srv.Instances() {
			if in.State != "terminated" {
				return false
			}
		}
		return true
	})
}
