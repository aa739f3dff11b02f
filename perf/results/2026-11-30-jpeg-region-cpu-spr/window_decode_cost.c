#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <jpeglib.h>
static unsigned char* slurp(const char* p, unsigned long* n){FILE*f=fopen(p,"rb");fseek(f,0,2);*n=ftell(f);fseek(f,0,0);unsigned char*b=malloc(*n);fread(b,1,*n,f);fclose(f);return b;}
static int mcus_row(unsigned char* in, unsigned long n){struct jpeg_decompress_struct d; struct jpeg_error_mgr e; d.err=jpeg_std_error(&e); jpeg_create_decompress(&d); jpeg_mem_src(&d,in,n); jpeg_read_header(&d,TRUE);
 int hm=d.max_h_samp_factor; int m=(d.image_width+8*hm-1)/(8*hm); jpeg_destroy_decompress(&d); return m;}
static unsigned char* transcode(unsigned char* in, unsigned long n, int ri, unsigned long* outn){
  struct jpeg_decompress_struct d; struct jpeg_compress_struct c; struct jpeg_error_mgr e1,e2;
  d.err=jpeg_std_error(&e1); jpeg_create_decompress(&d); jpeg_mem_src(&d,in,n); jpeg_read_header(&d,TRUE);
  jvirt_barray_ptr* co=jpeg_read_coefficients(&d);
  c.err=jpeg_std_error(&e2); jpeg_create_compress(&c); unsigned char* out=NULL; *outn=0; jpeg_mem_dest(&c,&out,outn);
  jpeg_copy_critical_parameters(&d,&c); c.restart_interval=ri; c.optimize_coding=getenv("OPT")?1:0;
  jpeg_write_coefficients(&c,co); jpeg_finish_compress(&c); jpeg_destroy_compress(&c); jpeg_finish_decompress(&d); jpeg_destroy_decompress(&d); return out;}
typedef struct {int H,W,mw,mh,mpr,ri,sof,data; int nseg; long* seg; long* segend;} Layout;
static int rd16(unsigned char*p){return p[0]<<8|p[1];}
static void layout(unsigned char* b, unsigned long n, Layout* L){
  long p=2; int hmax=1,vmax=1; L->ri=0;
  while(p<(long)n){ int m=b[p+1]; int len=rd16(b+p+2);
    if(m==0xC0||m==0xC1){L->sof=p; L->H=rd16(b+p+5); L->W=rd16(b+p+7); int nc=b[p+9]; for(int c=0;c<nc;c++){int s=b[p+11+3*c]; if((s>>4)>hmax)hmax=s>>4; if((s&15)>vmax)vmax=s&15;} if(nc==1){hmax=vmax=1;}}
    if(m==0xDD) L->ri=rd16(b+p+4);
    p+=2+len; if(m==0xDA) break; }
  L->data=p; L->mw=8*hmax; L->mh=8*vmax; L->mpr=(L->W+L->mw-1)/L->mw;
  int cap=1+ (L->mpr*((L->H+L->mh-1)/L->mh))/L->ri; L->seg=malloc(sizeof(long)*cap); L->segend=malloc(sizeof(long)*cap); L->nseg=0; L->seg[0]=p;
  for(long q=p;q+1<(long)n;q++){ if(b[q]!=0xFF) continue; int x=b[q+1]; if(x>=0xD0&&x<=0xD7){L->segend[L->nseg]=q; L->nseg++; L->seg[L->nseg]=q+2; q++;} else if(x==0xD9){L->segend[L->nseg]=q; L->nseg++; break;} }
}
// synthetic stream for MCU rows [r0,r1) and intervals [i0,i1)
static unsigned long synth(unsigned char* b, Layout* L, int r0,int r1,int i0,int i1, unsigned char* out){
  memcpy(out,b,L->data); int y0=r0*L->mh, y1=r1*L->mh; if(y1>L->H)y1=L->H; int x0=i0*L->ri*L->mw, x1=i1*L->ri*L->mw; if(x1>L->W)x1=L->W;
  out[L->sof+5]=(y1-y0)>>8; out[L->sof+6]=(y1-y0)&255; out[L->sof+7]=(x1-x0)>>8; out[L->sof+8]=(x1-x0)&255;
  unsigned long o=L->data; int ipr=L->mpr/L->ri, k=0;
  for(int r=r0;r<r1;r++) for(int i=i0;i<i1;i++){ int s=r*ipr+i; if(k){out[o++]=0xFF; out[o++]=0xD0+((k-1)&7);} long len=L->segend[s]-L->seg[s]; memcpy(out+o,b+L->seg[s],len); o+=len; k++; }
  out[o++]=0xFF; out[o++]=0xD9; return o;}
typedef struct {float top,left,h,w;} Win;
static unsigned char buf[4000*4000*3];
static void decode_window(unsigned char* in, unsigned long n, float top, float left, float h, float w, int outsz){
  struct jpeg_decompress_struct d; struct jpeg_error_mgr e; d.err=jpeg_std_error(&e); jpeg_create_decompress(&d); jpeg_mem_src(&d,in,n); jpeg_read_header(&d,TRUE); d.out_color_space=JCS_RGB;
  int shrink=1; while(shrink<8 && h/(shrink*2)>=outsz && w/(shrink*2)>=outsz) shrink*=2; d.scale_num=8/shrink; d.scale_denom=8;
  jpeg_start_decompress(&d); float s=1.0f/shrink; int OH=d.output_height, OW=d.output_width;
  int r0=(int)floorf(top*s)-1; if(r0<0)r0=0; int r1=(int)ceilf((top+h)*s)+1; if(r1>OH)r1=OH;
  int c0=(int)floorf(left*s)-2; if(c0<0)c0=0; int c1=(int)ceilf((left+w)*s)+2; if(c1>OW)c1=OW;
  JDIMENSION off=c0, wid=c1-c0; jpeg_crop_scanline(&d,&off,&wid);
  if(r0>0) jpeg_skip_scanlines(&d,r0);
  while((int)d.output_scanline<r1){JSAMPROW row=buf+(d.output_scanline-r0)*OW*3; jpeg_read_scanlines(&d,&row,1);}
  jpeg_abort_decompress(&d); jpeg_destroy_decompress(&d);}
static unsigned char sbuf[4<<20];
static void decode_roi(unsigned char* b, Layout* L, float top,float left,float h,float w,int outsz){
  int shrink=1; while(shrink<8 && h/(shrink*2)>=outsz && w/(shrink*2)>=outsz) shrink*=2;
  // needed full-res pixel span with guard (2 scaled px)
  float g=2.0f*shrink; float y0=top-g, y1=top+h+g, x0=left-g, x1=left+w+g;
  int r0=(int)floorf(y0/L->mh); if(r0<0)r0=0; int r1=(int)ceilf(y1/L->mh); int mr=(L->H+L->mh-1)/L->mh; if(r1>mr)r1=mr;
  int iw=L->ri*L->mw; int i0=(int)floorf(x0/iw); if(i0<0)i0=0; int i1=(int)ceilf(x1/iw); int ipr=L->mpr/L->ri; if(i1>ipr)i1=ipr;
  unsigned long n=synth(b,L,r0,r1,i0,i1,sbuf);
  decode_window(sbuf,n,top-r0*L->mh,left-i0*iw,h,w,outsz);
}
static double now(){struct timespec a; clock_gettime(CLOCK_MONOTONIC,&a); return a.tv_sec+1e-9*a.tv_nsec;}
static void rrc(int H,int W,unsigned* seed,Win* o){ double area=(double)H*W; for(int t=0;t<10;t++){ double sc=0.08+0.92*rand_r(seed)/(double)RAND_MAX; double lr=log(3./4)+(log(4./3)-log(3./4))*rand_r(seed)/(double)RAND_MAX; double ar=exp(lr);
  int w=(int)round(sqrt(area*sc*ar)), h=(int)round(sqrt(area*sc/ar)); if(w>0&&h>0&&w<=W&&h<=H){o->top=rand_r(seed)%(H-h+1); o->left=rand_r(seed)%(W-w+1); o->h=h;o->w=w;return;}}
  o->h=H<W?H:W; o->w=o->h; o->top=(H-o->h)/2; o->left=(W-o->w)/2;}
int main(int argc,char**argv){ int nf=argc-1; unsigned char** f0=malloc(nf*sizeof(void*)); unsigned char** f4=malloc(nf*sizeof(void*)); unsigned long *n0=malloc(nf*8),*n4=malloc(nf*8); Layout* L=malloc(nf*sizeof(Layout));
  long b0=0,b4=0;
  for(int i=0;i<nf;i++){unsigned long n; unsigned char* b=slurp(argv[i+1],&n); int m=mcus_row(b,n); int ri=1; int maxri=getenv("RI")?atoi(getenv("RI")):4; for(int d=maxri;d>=1;d--) if(m%d==0){ri=d;break;}
    f0[i]=transcode(b,n,0,&n0[i]); f4[i]=transcode(b,n,ri,&n4[i]); layout(f4[i],n4[i],&L[i]); b0+=n0[i]; b4+=n4[i];}
  printf("bytes %ld -> %ld (%.2f%%)\n",b0,b4,100.0*(b4-b0)/b0);
  int mode=getenv("MODE")?atoi(getenv("MODE")):-1; if(mode>=0){unsigned seed=1; for(int k=0;k<6000;k++){int i=k%nf; Win w; rrc(L[i].H,L[i].W,&seed,&w); if(mode==0) decode_window(f0[i],n0[i],w.top,w.left,w.h,w.w,224); else decode_roi(f4[i],&L[i],w.top,w.left,w.h,w.w,224);} return 0;}
  for(int rep=0;rep<3;rep++){
  unsigned seed=1; double t=now(); for(int k=0;k<2000;k++){int i=k%nf; Win w; rrc(L[i].H,L[i].W,&seed,&w); decode_window(f0[i],n0[i],w.top,w.left,w.h,w.w,224);} double ta=(now()-t)/2000*1e6;
  seed=1; t=now(); for(int k=0;k<2000;k++){int i=k%nf; Win w; rrc(L[i].H,L[i].W,&seed,&w); decode_window(f4[i],n4[i],w.top,w.left,w.h,w.w,224);} double tb=(now()-t)/2000*1e6;
  seed=1; t=now(); for(int k=0;k<2000;k++){int i=k%nf; Win w; rrc(L[i].H,L[i].W,&seed,&w); decode_roi(f4[i],&L[i],w.top,w.left,w.h,w.w,224);} double tc=(now()-t)/2000*1e6;
  printf("us per image: window(no rst) %.0f  window(rst) %.0f  roi(rst) %.0f\n",ta,tb,tc);}
}
