package schemas

// Kafka topics. Collectors key every message by host so that one host's messages
// stay in order on one partition.
const (
	TopicGPUSamples = "heliostat.gpu.samples"
	TopicGPUEvents  = "heliostat.gpu.events"
	TopicJobEvents  = "heliostat.job.events"
	// TopicAllocations carries GPU↔job allocation intervals (AllocBatch).
	TopicAllocations = "heliostat.job.allocations"
	TopicActions     = "heliostat.actions"
	TopicDeadletter  = "heliostat.deadletter"
)

// Dead-letter message headers. A dead-lettered message keeps its original key and
// value; these headers say where it came from and why it was rejected.
const (
	HeaderDeadletterReason    = "heliostat-reason"
	HeaderDeadletterTopic     = "heliostat-source-topic"
	HeaderDeadletterPartition = "heliostat-source-partition"
	HeaderDeadletterOffset    = "heliostat-source-offset"
	// HeaderDeadletterTruncated, on a dead letter whose value was cut to
	// fit the size Kafka accepts, holds the original value's length.
	HeaderDeadletterTruncated = "heliostat-deadletter-truncated"
)

// DataTopics returns the topics ingest consumes, plus the dead-letter topic:
// what a deployment must create.
func DataTopics() []string {
	return []string{TopicGPUSamples, TopicGPUEvents, TopicJobEvents, TopicAllocations, TopicDeadletter}
}
