package collector

// GPUProcesses lists the compute processes running on one GPU or one MIG
// instance. It is plain data so that the package that reads the driver (nvml)
// and the one that attributes GPUs to jobs (attrib) need not know each other.
type GPUProcesses struct {
	// Index is the GPU's device index on the host; a MIG instance carries
	// the index of its GPU.
	Index int
	// UUID is the whole GPU's UUID.
	UUID string
	// MIGUUID is the MIG instance's UUID, "" for a whole GPU.
	MIGUUID string
	// PIDs are the host process IDs of the compute processes, each once,
	// in the order the driver listed them.
	PIDs []uint32
}
