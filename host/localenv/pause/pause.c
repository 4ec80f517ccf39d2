/*
 * The sandbox process of every pod on a local node (the pod's first process, which holds its
 * namespaces), and the body of test workloads: it sleeps until SIGINT or SIGTERM, reaping any
 * orphans the pod's other processes leave to it as PID 1.
 *
 * `pause ready` exits 0 at once, so test workloads can use it as an exec readiness probe.
 */
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signal_number) {
	(void)signal_number;
	_exit(0);
}

static void reap(int signal_number) {
	(void)signal_number;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "ready") == 0) {
		return 0;
	}
	struct sigaction on_stop = {.sa_handler = stop};
	struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
	if (sigaction(SIGINT, &on_stop, NULL) < 0 || sigaction(SIGTERM, &on_stop, NULL) < 0 ||
	    sigaction(SIGCHLD, &on_child, NULL) < 0) {
		return 1;
	}
	for (;;) {
		pause();
	}
}
