package awssim

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// AMI families of the simulated images.
const (
	familyAL2023       = "AL2023"
	familyAL2          = "AL2"
	familyBottlerocket = "Bottlerocket"
	familyCustom       = "Custom"
)

// Owners of the public images (the EKS AMI and Bottlerocket publishing accounts).
const (
	eksAMIOwner        = "602401143452"
	bottlerocketOwner  = "092701018921"
	imageReleaseOld    = "v20261001"
	imageReleaseLatest = "v20261101"
	bottlerocketOld    = "1.49.0"
	bottlerocketLatest = "1.50.0"
)

// image is an AMI plus what node bootstrap needs to know about it.
type image struct {
	ec2types.Image
	family     string // AL2023, AL2, Bottlerocket, Windows2019/2022/2025, Custom
	k8sVersion string
	variant    string // standard, nvidia, neuron
	arch       string // amd64, arm64
}

type ssmParam struct {
	name     string
	value    string
	version  int64
	modified time.Time
}

// k8sVersions are the Kubernetes versions with published EKS-optimized images.
func (st *state) k8sVersions() []string {
	vs := []string{}
	for m := 30; m <= 36; m++ {
		vs = append(vs, fmt.Sprintf("1.%d", m))
	}
	found := false
	for _, v := range vs {
		if v == st.s.opts.KubernetesVersion {
			found = true
		}
	}
	if !found {
		vs = append(vs, st.s.opts.KubernetesVersion)
	}
	return vs
}

func minorOf(v string) int {
	_, m, _ := strings.Cut(v, ".")
	n, _ := strconv.Atoi(m)
	return n
}

func shortHash(s string) string {
	h := fnv.New32a()
	h.Write([]byte(s))
	return fmt.Sprintf("%08x", h.Sum32())
}

func (st *state) addImage(im *image, ssmPaths ...string) {
	st.images = append(st.images, im)
	for _, p := range ssmPaths {
		st.params[p] = &ssmParam{name: p, value: aws.ToString(im.ImageId), version: 1, modified: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	}
}

func (st *state) newImage(name, family, k8s, variant, ec2Arch, owner, description string, created time.Time, bottlerocket bool) *image {
	id := st.ids.id("ami")
	arch := "amd64"
	if ec2Arch == "arm64" {
		arch = "arm64"
	}
	snap := st.ids.id("snap")
	bdm := []ec2types.BlockDeviceMapping{{
		DeviceName: aws.String("/dev/xvda"),
		Ebs: &ec2types.EbsBlockDevice{SnapshotId: aws.String(snap), VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3,
			DeleteOnTermination: aws.Bool(true), Encrypted: aws.Bool(false)},
	}}
	if bottlerocket {
		bdm[0].Ebs.VolumeSize = aws.Int32(2)
		bdm = append(bdm, ec2types.BlockDeviceMapping{DeviceName: aws.String("/dev/xvdb"), Ebs: &ec2types.EbsBlockDevice{
			SnapshotId: aws.String(st.ids.id("snap")), VolumeSize: aws.Int32(20), VolumeType: ec2types.VolumeTypeGp3,
			DeleteOnTermination: aws.Bool(true), Encrypted: aws.Bool(false)}})
	}
	alias := "amazon"
	im := &image{family: family, k8sVersion: k8s, variant: variant, arch: arch}
	im.Image = ec2types.Image{
		ImageId:             aws.String(id),
		Name:                aws.String(name),
		Description:         aws.String(description),
		Architecture:        ec2types.ArchitectureValues(ec2Arch),
		OwnerId:             aws.String(owner),
		ImageOwnerAlias:     aws.String(alias),
		State:               ec2types.ImageStateAvailable,
		CreationDate:        aws.String(created.Format("2006-01-02T15:04:05.000Z")),
		ImageLocation:       aws.String(owner + "/" + name),
		ImageType:           ec2types.ImageTypeValuesMachine,
		Public:              aws.Bool(true),
		RootDeviceName:      aws.String("/dev/xvda"),
		RootDeviceType:      ec2types.DeviceTypeEbs,
		VirtualizationType:  ec2types.VirtualizationTypeHvm,
		Hypervisor:          ec2types.HypervisorTypeXen,
		EnaSupport:          aws.Bool(true),
		SriovNetSupport:     aws.String("simple"),
		PlatformDetails:     aws.String("Linux/UNIX"),
		UsageOperation:      aws.String("RunInstances"),
		BootMode:            ec2types.BootModeValuesUefiPreferred,
		BlockDeviceMappings: bdm,
		DeprecationTime:     aws.String(created.AddDate(2, 0, 0).Format("2006-01-02T15:04:05.000Z")),
	}
	if owner == st.s.opts.AccountID {
		im.ImageOwnerAlias = nil
		im.Public = aws.Bool(false)
	}
	return im
}

// setupImages publishes the EKS-optimized AMIs (AL2023, AL2 up to 1.32, Bottlerocket) for
// every supported Kubernetes version, two releases each, with their public SSM parameters, and
// one private custom image of the account.
func (st *state) setupImages() {
	oldDate := time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC)
	newDate := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, v := range st.k8sVersions() {
		// AL2023
		for _, arch := range []string{"x86_64", "arm64"} {
			variants := []string{"standard", "nvidia"}
			if arch == "x86_64" {
				variants = append(variants, "neuron")
			}
			for _, variant := range variants {
				base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s", v, arch, variant)
				for _, rel := range []string{imageReleaseOld, imageReleaseLatest} {
					name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, variant, v, rel)
					created := oldDate
					if rel == imageReleaseLatest {
						created = newDate
					}
					im := st.newImage(name, familyAL2023, v, variant, arch, eksAMIOwner,
						fmt.Sprintf("EKS-optimized Kubernetes node based on Amazon Linux 2023, (k8s: %s.x, %s)", v, variant), created, false)
					paths := []string{base + "/" + name + "/image_id"}
					if rel == imageReleaseLatest {
						paths = append(paths, base+"/recommended/image_id")
					}
					st.addImage(im, paths...)
					if rel == imageReleaseLatest {
						st.params[base+"/recommended/release_version"] = &ssmParam{name: base + "/recommended/release_version",
							value: fmt.Sprintf("%s.0-%s", v, strings.TrimPrefix(rel, "v")), version: 1, modified: newDate}
						st.params[base+"/recommended/image_name"] = &ssmParam{name: base + "/recommended/image_name", value: name, version: 1, modified: newDate}
					}
				}
			}
		}
		// AL2: EKS stopped publishing AL2 images after Kubernetes 1.32.
		if minorOf(v) <= 32 {
			for _, a := range []struct{ dir, arch, prefix, variant string }{
				{"amazon-linux-2", "x86_64", "amazon-eks-node", "standard"},
				{"amazon-linux-2-arm64", "arm64", "amazon-eks-arm64-node", "standard"},
				{"amazon-linux-2-gpu", "x86_64", "amazon-eks-gpu-node", "nvidia"},
			} {
				base := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/%s", v, a.dir)
				for _, rel := range []string{imageReleaseOld, imageReleaseLatest} {
					name := fmt.Sprintf("%s-%s-%s", a.prefix, v, rel)
					created := oldDate
					if rel == imageReleaseLatest {
						created = newDate
					}
					im := st.newImage(name, familyAL2, v, a.variant, a.arch, eksAMIOwner,
						fmt.Sprintf("EKS Kubernetes Worker AMI with AmazonLinux2 image, (k8s: %s)", v), created, false)
					paths := []string{base + "/" + name + "/image_id"}
					if rel == imageReleaseLatest {
						paths = append(paths, base+"/recommended/image_id")
					}
					st.addImage(im, paths...)
				}
			}
		}
		// Bottlerocket
		for _, variant := range []string{"", "-nvidia"} {
			for _, arch := range []string{"x86_64", "arm64"} {
				for _, rel := range []string{bottlerocketOld, bottlerocketLatest} {
					name := fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s-%s", v, variant, arch, rel, shortHash(v+variant+arch+rel))
					created := oldDate
					if rel == bottlerocketLatest {
						created = newDate
					}
					vname := "standard"
					if variant != "" {
						vname = "nvidia"
					}
					im := st.newImage(name, familyBottlerocket, v, vname, arch, bottlerocketOwner,
						fmt.Sprintf("bottlerocket-aws-k8s-%s%s", v, variant), created, true)
					base := fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s", v, variant, arch)
					paths := []string{base + "/" + rel + "/image_id", base + "/v" + rel + "/image_id"}
					if rel == bottlerocketLatest {
						paths = append(paths, base+"/latest/image_id")
						st.params[base+"/latest/image_version"] = &ssmParam{name: base + "/latest/image_version", value: rel, version: 1, modified: newDate}
					}
					st.addImage(im, paths...)
				}
			}
		}
	}
	st.setupWindowsImages(newDate)
	// A private image of the account, tagged for AMI selector tests.
	custom := st.newImage("karpool-custom-al2023-x86_64", familyAL2023, st.s.opts.KubernetesVersion, "standard", "x86_64",
		st.s.opts.AccountID, "Custom AL2023 image built by the account", newDate, false)
	custom.family = familyAL2023
	custom.Tags = []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(st.s.opts.ClusterName)}}
	st.addImage(custom)
}

// setupWindowsImages publishes the EKS-optimized Windows Server Core images (2019, 2022, 2025)
// of every Kubernetes version under Windows' "latest" SSM parameters: x86_64 only, a 50 GiB
// root volume on /dev/sda1.
func (st *state) setupWindowsImages(created time.Time) {
	for _, v := range st.k8sVersions() {
		for _, year := range []string{"2019", "2022", "2025"} {
			name := fmt.Sprintf("Windows_Server-%s-English-Core-EKS_Optimized-%s-2026.11.12", year, v)
			im := st.newImage(name, "Windows"+year, v, "standard", "x86_64", "801119661308",
				fmt.Sprintf("Microsoft Windows Server %s Core optimized for EKS and Kubernetes %s", year, v), created, false)
			im.RootDeviceName = aws.String("/dev/sda1")
			im.BlockDeviceMappings[0].DeviceName = aws.String("/dev/sda1")
			im.BlockDeviceMappings[0].Ebs.VolumeSize = aws.Int32(50)
			im.PlatformDetails = aws.String("Windows")
			im.Platform = ec2types.PlatformValuesWindows
			st.addImage(im, fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", year, v))
		}
	}
}

func (st *state) imageByID(id string) *image {
	for _, im := range st.images {
		if aws.ToString(im.ImageId) == id {
			return im
		}
	}
	return nil
}
