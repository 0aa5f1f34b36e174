"""Bounds the handlers hold requests to.

Kafka's controller refuses an operation that would write more records than this to its metadata log
(QuorumController.MAX_RECORDS_PER_USER_OP; AclControlManager, ClientQuotaControlManager), with
POLICY_VIOLATION and this message: a request that changes the ACLs' or the quotas' state file is held
to the same bound (broker/storage/state_file.py writes the file whole on every change).
"""

MAX_CHANGES_PER_REQUEST = 10_000
TOO_MANY_CHANGES = "Unable to perform excessively large batch operation."
