package main

import (
	"k8s.io/component-base/cli"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

// runAPIServer runs the upstream kube-apiserver command with the given flags.
func runAPIServer(args []string) int {
	cmd := apiserver.NewAPIServerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runControllerManager runs the upstream kube-controller-manager command.
func runControllerManager(args []string) int {
	cmd := controllermanager.NewControllerManagerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runKubectl runs upstream kubectl, so tests use a client of the same version
// as the server instead of whatever the machine happens to have installed.
func runKubectl(args []string) int {
	cmd := kubectlcmd.NewDefaultKubectlCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runScheduler runs the upstream kube-scheduler, which places the pods of a
// cluster that has a node.
func runScheduler(args []string) int {
	cmd := scheduler.NewSchedulerCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}

// runKubelet runs the upstream kubelet against a containerd socket on the host.
func runKubelet(args []string) int {
	cmd := kubelet.NewKubeletCommand()
	cmd.SetArgs(args)
	return cli.Run(cmd)
}
