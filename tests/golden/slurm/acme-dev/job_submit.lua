function slurm_job_submit(job_desc, part_list, submit_uid)
  if job_desc.comment == nil then
    job_desc.comment = "submitted-via-sunk"
  end
  return slurm.SUCCESS
end
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
