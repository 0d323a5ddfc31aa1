/**
 * A saved speaker's name must say something: empty, only spaces, or only other Unicode white
 * space (tabs, line breaks, no-break and ideographic spaces, …) is 400 on enroll and rename
 * (issue 38, item 12). The name is checked before the job or speaker is looked up, so no job
 * needs to run: a real name on the same missing ids answers 404, which shows the 400 comes from
 * the name.
 */
import t from "tap"
import { expectApiError, jsonApi } from "../support/jsonApi.ts"
import { startTestService } from "../support/service.ts"

const service = await startTestService(t)
const { apiKey } = await service.newUser()
const { call } = jsonApi(service.base)
const missingJob = "job_00000000000000000000000000000000"

const blank = ["", " ", "     ", "\t", " \n\r ", "\u00a0", "\u2003\u2009", "\u3000", "\ufeff", " \u2028 \u2029 "]

t.test("enroll refuses a blank name", async (t) => {
  for (const name of blank) {
    expectApiError(t, await call("POST", "/recognition/speakers", apiKey, { jobId: missingJob, speakerLabel: "SPEAKER_00", name }), 400)
  }
  expectApiError(t, await call("POST", "/recognition/speakers", apiKey, { jobId: missingJob, speakerLabel: "SPEAKER_00", name: " Dana " }), 404, "job_not_found")
})

t.test("rename refuses a blank name", async (t) => {
  for (const name of blank) expectApiError(t, await call("PATCH", "/recognition/speakers/spk_missing", apiKey, { name }), 400)
  expectApiError(t, await call("PATCH", "/recognition/speakers/spk_missing", apiKey, { name: "Dana" }), 404, "speaker_not_found")
})
