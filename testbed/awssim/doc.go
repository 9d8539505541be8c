// Package awssim is a wire-level AWS simulator for tests and the local environment: one account
// and region served over the real AWS protocols (EC2 ec2query, IAM and STS awsquery, SQS
// awsJson1_0, EventBridge/SSM/Pricing awsJson1_1, EKS restJson1), so the project's one AWS
// implementation runs unchanged against it through the aws-sdk-go-v2 clients.
//
//	srv, err := awssim.Start(awssim.Options{ClusterName: "demo"})
//	defer srv.Close()
//	client := ec2.NewFromConfig(srv.AWSConfig()) // BaseEndpoint = srv.URL()
//
// Requests must be SigV4-signed; the signing service routes them. Faults (throttling, errors,
// latencies, insufficient capacity) and AWS-initiated events (spot interruptions, rebalance
// recommendations, scheduled changes, state changes, terminations) are driven from Go
// (SetFaults, InterruptSpot, …) or through the admin API under AdminURL(). Capacity
// reservations (ODCRs and Capacity Blocks) are added the same way (AddCapacityReservation) and
// launches target them as on EC2; Options.Clock lets a test move time forward. With Options.Kube,
// every running instance registers the Node its kubelet would. STATUS.md lists what is
// simulated and what is not.
package awssim

//go:generate go run ./internal/gen -o zz_generated_wire.go
