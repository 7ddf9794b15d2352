/* The names of completion statuses, as the enum spells them: what tools print. */
#include "emu/rocemu.h"

static const char *const wc_status_names[] = {
	[IBV_WC_SUCCESS] = "IBV_WC_SUCCESS",
	[IBV_WC_LOC_LEN_ERR] = "IBV_WC_LOC_LEN_ERR",
	[IBV_WC_LOC_QP_OP_ERR] = "IBV_WC_LOC_QP_OP_ERR",
	[IBV_WC_LOC_EEC_OP_ERR] = "IBV_WC_LOC_EEC_OP_ERR",
	[IBV_WC_LOC_PROT_ERR] = "IBV_WC_LOC_PROT_ERR",
	[IBV_WC_WR_FLUSH_ERR] = "IBV_WC_WR_FLUSH_ERR",
	[IBV_WC_MW_BIND_ERR] = "IBV_WC_MW_BIND_ERR",
	[IBV_WC_BAD_RESP_ERR] = "IBV_WC_BAD_RESP_ERR",
	[IBV_WC_LOC_ACCESS_ERR] = "IBV_WC_LOC_ACCESS_ERR",
	[IBV_WC_REM_INV_REQ_ERR] = "IBV_WC_REM_INV_REQ_ERR",
	[IBV_WC_REM_ACCESS_ERR] = "IBV_WC_REM_ACCESS_ERR",
	[IBV_WC_REM_OP_ERR] = "IBV_WC_REM_OP_ERR",
	[IBV_WC_RETRY_EXC_ERR] = "IBV_WC_RETRY_EXC_ERR",
	[IBV_WC_RNR_RETRY_EXC_ERR] = "IBV_WC_RNR_RETRY_EXC_ERR",
	[IBV_WC_LOC_RDD_VIOL_ERR] = "IBV_WC_LOC_RDD_VIOL_ERR",
	[IBV_WC_REM_INV_RD_REQ_ERR] = "IBV_WC_REM_INV_RD_REQ_ERR",
	[IBV_WC_REM_ABORT_ERR] = "IBV_WC_REM_ABORT_ERR",
	[IBV_WC_INV_EECN_ERR] = "IBV_WC_INV_EECN_ERR",
	[IBV_WC_INV_EEC_STATE_ERR] = "IBV_WC_INV_EEC_STATE_ERR",
	[IBV_WC_FATAL_ERR] = "IBV_WC_FATAL_ERR",
	[IBV_WC_RESP_TIMEOUT_ERR] = "IBV_WC_RESP_TIMEOUT_ERR",
	[IBV_WC_GENERAL_ERR] = "IBV_WC_GENERAL_ERR",
};

const char *rocemu_wc_status_str(enum ibv_wc_status status)
{
	if ((unsigned)status < sizeof(wc_status_names) / sizeof(wc_status_names[0]) &&
	    wc_status_names[status])
		return wc_status_names[status];
	return "IBV_WC_(unknown)";
}
