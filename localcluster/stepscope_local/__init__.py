"""stepscope local cluster: Kubernetes API emulator, S3 server and a runner for pods and Jobs."""
